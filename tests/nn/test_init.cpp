// nn::init against torch.nn.init's definitions: the moments and ranges of each distribution (the
// truncated normal against its exact moments, far into a tail too), fans and gains, reproducibility
// under a seed, and the errors for bad arguments.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "mdl.h"
#include "nn/init.h"

using namespace mdl;
namespace init = mdl::nn::init;

namespace {
struct Moments {
  double mean, std, min, max;
};

Moments moments_of(const Tensor& t) {
  const std::vector<double> v = to_dtype(t, kF64).contiguous().to_vector<double>();
  double s = 0, s2 = 0, lo = v[0], hi = v[0];
  for (double x : v) s += x, s2 += x * x, lo = std::min(lo, x), hi = std::max(hi, x);
  const double n = double(v.size()), m = s / n;
  return {m, std::sqrt(s2 / n - m * m), lo, hi};
}

double pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }

// The exact mean and std of Normal(mean, std) truncated to [a, b].
Moments truncated_normal(double mean, double std, double a, double b) {
  const double al = (a - mean) / std, be = (b - mean) / std;
  const double z = 0.5 * (std::erfc(al / std::sqrt(2.0)) - std::erfc(be / std::sqrt(2.0)));
  const double d = (pdf(al) - pdf(be)) / z;
  const double bpdf = std::isinf(be) ? 0.0 : be * pdf(be);
  return {mean + std * d, std * std::sqrt(1.0 + (al * pdf(al) - bpdf) / z - d * d), a, b};
}
}  // namespace

TEST_CASE("init: trunc_normal_ matches the exact truncated normal, even where the interval holds little mass") {
  struct Case {
    double mean, std, a, b;
  };
  const int64_t n = 400000;
  for (const Case c : {Case{0, 1, -2, 2}, Case{0, 1, 3, 100}, Case{0, 1, 5, 6}, Case{1, 2, 0, 3}, Case{0, 1, -6, -5},
                       Case{0, 1, 30, 31}}) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    manual_seed(11);
    Tensor t = empty({n}, kF64);
    init::trunc_normal_(t, c.mean, c.std, c.a, c.b);
    const Moments got = moments_of(t), want = truncated_normal(c.mean, c.std, c.a, c.b);
    CHECK(got.min >= c.a);
    CHECK(got.max <= c.b);
    CHECK(got.min > c.a);  // no value piled up on a bound
    CHECK(got.max < c.b);
    CHECK(std::abs(got.mean - want.mean) < 6 * want.std / std::sqrt(double(n)));
    CHECK(got.std == doctest::Approx(want.std).epsilon(0.01));
  }
}

TEST_CASE("init: trunc_normal_ is reproducible under manual_seed and writes any floating tensor") {
  Tensor x = empty({3, 50}), y = empty({3, 50});
  manual_seed(5);
  init::trunc_normal_(x, 0.0, 0.02, -0.04, 0.04);
  manual_seed(5);
  init::trunc_normal_(y, 0.0, 0.02, -0.04, 0.04);
  CHECK(allclose(x, y, 0, 0));
  Generator g(5);
  Tensor z = empty({3, 50});
  init::trunc_normal_(z, 0.0, 0.02, -0.04, 0.04, &g);
  CHECK(allclose(x, z, 0, 0));

  Tensor h = empty({64, 8}, kF16);
  init::trunc_normal_(h.transpose(0, 1), 0.0, 1.0, -1.0, 1.0);  // a non-contiguous view
  const Moments m = moments_of(h);
  CHECK(m.min >= -1.0);
  CHECK(m.max <= 1.0);
}

TEST_CASE("init: trunc_normal_ refuses an empty interval, a bad std, an integer tensor and a hopeless tail") {
  Tensor t = empty({4});
  CHECK_THROWS_AS(init::trunc_normal_(t, 0, 1, 1, 1), Error);
  CHECK_THROWS_AS(init::trunc_normal_(t, 0, 1, 2, -2), Error);
  CHECK_THROWS_AS(init::trunc_normal_(t, 0, 0, -2, 2), Error);
  CHECK_THROWS_AS(init::trunc_normal_(t, 0, -1, -2, 2), Error);
  CHECK_THROWS_AS(init::trunc_normal_(t, NAN, 1, -2, 2), Error);
  CHECK_THROWS_AS(init::trunc_normal_(empty({4}, kI64), 0, 1, -2, 2), Error);
  CHECK_THROWS_AS(init::trunc_normal_(t, 0, 1, 100, 101), Error);
}

TEST_CASE("init: uniform_ and normal_ have the requested range and moments") {
  manual_seed(2);
  Tensor u = empty({200000});
  init::uniform_(u, -3.0, 5.0);
  const Moments mu = moments_of(u);
  CHECK(mu.min >= -3.0);
  CHECK(mu.max < 5.0);
  CHECK(mu.mean == doctest::Approx(1.0).epsilon(0.01));
  CHECK(mu.std == doctest::Approx(8.0 / std::sqrt(12.0)).epsilon(0.01));

  Tensor g = empty({200000});
  init::normal_(g, 2.0, 0.5);
  const Moments mg = moments_of(g);
  CHECK(std::abs(mg.mean - 2.0) < 6 * 0.5 / std::sqrt(200000.0));
  CHECK(mg.std == doctest::Approx(0.5).epsilon(0.01));

  init::constant_(u, 0.25);
  CHECK(moments_of(u).min == 0.25);
  CHECK(moments_of(u).max == 0.25);
  init::zeros_(u);
  CHECK(moments_of(u).max == 0.0);
  init::ones_(u);
  CHECK(moments_of(u).min == 1.0);
}

TEST_CASE("init: fans and gains as torch.nn.init") {
  const init::Fans f = init::compute_fans(empty({256, 128, 3, 5}));
  CHECK(f.fan_in == 128 * 15);
  CHECK(f.fan_out == 256 * 15);
  CHECK(init::calculate_gain("linear") == 1.0);
  CHECK(init::calculate_gain("sigmoid") == 1.0);
  CHECK(init::calculate_gain("tanh") == doctest::Approx(5.0 / 3.0));
  CHECK(init::calculate_gain("relu") == doctest::Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain("leaky_relu") == doctest::Approx(std::sqrt(2.0 / (1.0 + 0.01 * 0.01))));
  CHECK(init::calculate_gain("leaky_relu", 0.2) == doctest::Approx(std::sqrt(2.0 / 1.04)));
  CHECK(init::calculate_gain("selu") == 0.75);
  for (const char* linear_like :
       {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})
    CHECK(init::calculate_gain(linear_like) == 1.0);
  CHECK_THROWS_AS(init::calculate_gain("softplus"), Error);
  CHECK_THROWS_AS(init::compute_fans(empty({5})), Error);
}

TEST_CASE("init: kaiming and xavier bounds and standard deviations") {
  manual_seed(3);
  Tensor w = empty({256, 128, 3, 3});
  const double fan_in = 128 * 9, fan_out = 256 * 9;

  init::kaiming_uniform_(w, 0.0, "fan_in", "relu");
  double bound = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(fan_in);
  Moments m = moments_of(w);
  CHECK(m.max <= bound);
  CHECK(m.min >= -bound);
  CHECK(m.max > 0.99 * bound);
  CHECK(m.std == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.01));

  init::kaiming_normal_(w, 0.2, "fan_out", "leaky_relu");
  CHECK(moments_of(w).std == doctest::Approx(std::sqrt(2.0 / 1.04) / std::sqrt(fan_out)).epsilon(0.01));

  init::xavier_uniform_(w, 2.0);
  bound = 2.0 * std::sqrt(6.0 / (fan_in + fan_out));
  m = moments_of(w);
  CHECK(m.max <= bound);
  CHECK(m.min >= -bound);
  CHECK(m.max > 0.99 * bound);

  init::xavier_normal_(w, 0.5);
  CHECK(moments_of(w).std == doctest::Approx(0.5 * std::sqrt(2.0 / (fan_in + fan_out))).epsilon(0.01));

  CHECK_THROWS_AS(init::kaiming_uniform_(w, 0.0, "fan_middle"), Error);
  CHECK_THROWS_AS(init::kaiming_normal_(empty({4, 0}), 0.0, "fan_in"), Error);
  CHECK_THROWS_AS(init::xavier_uniform_(empty({7})), Error);
}

TEST_CASE("init: uniform_ and normal_ refuse reversed bounds, a negative std and integer tensors") {
  Tensor t = empty({4});
  CHECK_THROWS_WITH_AS(init::uniform_(t, 2.0, 1.0), doctest::Contains("uniform_: lower bound 2 above upper bound 1"),
                       Error);
  CHECK_THROWS_AS(init::uniform_(t, NAN, 1.0), Error);
  CHECK_THROWS_AS(init::uniform_(t, 0.0, INFINITY), Error);
  init::uniform_(t, 1.0, 1.0);  // an empty range gives its one value, as PyTorch
  CHECK(moments_of(t).max == 1.0);
  CHECK_THROWS_WITH_AS(init::normal_(t, 0.0, -1.0), doctest::Contains("normal_: std must be finite and >= 0, got -1"),
                       Error);
  CHECK_THROWS_AS(init::normal_(t, 0.0, NAN), Error);
  init::normal_(t, 3.0, 0.0);
  CHECK(moments_of(t).min == 3.0);
  Tensor ints = zeros({4}, kI64);
  CHECK_THROWS_WITH_AS(init::normal_(ints), doctest::Contains("normal_: expected a floating tensor"), Error);
  CHECK_THROWS_WITH_AS(init::uniform_(ints), doctest::Contains("uniform_: expected a floating tensor"), Error);
  CHECK_THROWS_AS(init::kaiming_uniform_(zeros({4, 4}, kI32)), Error);
  CHECK(moments_of(ints).max == 0.0);  // left untouched
  init::constant_(ints, 7);            // filling an integer tensor is fine
  CHECK(moments_of(ints).min == 7.0);
  CHECK_THROWS_AS(init::uniform_(Tensor()), Error);
  CHECK_THROWS_AS(init::normal_(Tensor()), Error);
}
