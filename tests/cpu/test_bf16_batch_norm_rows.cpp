// bf16 batch norm's row loops (cpu/bf16_batch_norm_rows.h) at every width this CPU runs (4, 8, 16
// floats) against double math: row lengths around each width and the sum block; sums past float's
// range; the output with and without the ReLU and the residual, and the input gradient, each within a
// bf16 rounding of the double result; and F::batch_norm_relu on bf16 with wide_bf16_batch_norm off and
// on, forward and gradients, the same bits on 1 and 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/bf16_batch_norm_rows.h"
#include "cpu/cpu_features.h"
#include "nn/functional.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"
#include "tensor/parallel.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

std::vector<const cpu::Bf16BatchNormRows*> widths_here() {
  std::vector<const cpu::Bf16BatchNormRows*> w{&cpu::bf16_batch_norm_rows4()};
  if (cpu::has_avx2_fma()) w.push_back(&cpu::bf16_batch_norm_rows8());
  if (cpu::has_avx512f()) w.push_back(&cpu::bf16_batch_norm_rows16());
  return w;
}

// n bf16 values drawn uniformly from [lo, hi), as bits.
std::vector<uint16_t> bf16_uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<uint16_t> v(n);
  for (uint16_t& b : v) b = BFloat16(u(rng)).bits;
  return v;
}
double value(uint16_t b) { return double(float(BFloat16::from_bits(b))); }

// |got - want| within one bf16 rounding of want (half an ulp, 2^-9 relative, doubled) and the float
// error of the terms that made it (`terms`: the sum of their magnitudes), which may cancel.
bool within_bf16(uint16_t got, double want, double terms) {
  return std::abs(value(got) - want) <= std::abs(want) * 0x1p-8 + terms * 0x1p-21;
}

}  // namespace

TEST_CASE("bf16 batch norm rows: sums, output and input gradient match double math at every width") {
  std::mt19937 rng(21);
  const cpu::BnAffine k{1.7f, 0.25f, -0.1f};  // a, mean, b
  for (const cpu::Bf16BatchNormRows* rows : widths_here())
    for (int64_t n : {1, 3, 4, 7, 8, 15, 16, 17, 63, 64, 65, 130, 1027}) {
      CAPTURE(rows->width);
      CAPTURE(n);
      const size_t m = size_t(n);
      const std::vector<uint16_t> x = bf16_uniform(m, -2, 2, rng), g = bf16_uniform(m, -1, 1, rng),
                                  r = bf16_uniform(m, -1, 1, rng);
      double sum = 0, squares = 0, sg = 0, sgx = 0, sg_gated = 0, sgx_gated = 0;
      const double centre = 0.375;
      for (size_t i = 0; i < m; ++i) {
        const double xi = value(x[i]), gi = value(g[i]), pre = (xi - k.mean) * k.a + k.b;
        sum += xi;
        squares += (xi - centre) * (xi - centre);
        sg += gi;
        sgx += gi * (xi - centre);
        if (pre > 0) sg_gated += gi, sgx_gated += gi * (xi - centre);
      }
      const double tol = 1e-6 * double(n) + 1e-6;  // float lanes within blocks of 256
      CHECK(std::abs(rows->sum(x.data(), n) - sum) <= tol);
      CHECK(std::abs(rows->squares(x.data(), n, float(centre)) - squares) <= tol * (1 + squares));
      double plain[2] = {0, 0}, gated[2] = {0, 0};
      rows->grad_sums(g.data(), x.data(), n, float(centre), nullptr, plain);
      rows->grad_sums(g.data(), x.data(), n, float(centre), &k, gated);
      CHECK(std::abs(plain[0] - sg) <= tol);
      CHECK(std::abs(plain[1] - sgx) <= tol);
      CHECK(std::abs(gated[0] - sg_gated) <= tol);
      CHECK(std::abs(gated[1] - sgx_gated) <= tol);

      std::vector<uint16_t> y(m), yr(m), gx(m), gxr(m);
      rows->forward(x.data(), nullptr, y.data(), n, &k, false);
      rows->forward(x.data(), r.data(), yr.data(), n, &k, true);
      const float p = 0.8f, q = -0.3f, s = 0.05f;
      rows->backward(g.data(), x.data(), gx.data(), n, p, q, s, nullptr);
      rows->backward(g.data(), x.data(), gxr.data(), n, p, q, s, &k);
      int bad = 0;
      for (size_t i = 0; i < m; ++i) {
        const double xi = value(x[i]), gi = value(g[i]), pre = (xi - k.mean) * k.a + k.b;
        const double with_r = pre + value(r[i]), pre_terms = std::abs((xi - k.mean) * k.a) + std::abs(k.b);
        const double gated = pre > 0 ? gi : 0.0;
        bad += !within_bf16(y[i], pre, pre_terms);
        bad += !within_bf16(yr[i], with_r > 0 ? with_r : 0.0, pre_terms + std::abs(value(r[i])));
        bad += !within_bf16(gx[i], gi * p + xi * q + s, std::abs(gi * p) + std::abs(xi * q) + std::abs(s));
        bad += !within_bf16(gxr[i], gated * p + xi * q + s, std::abs(gated * p) + std::abs(xi * q) + std::abs(s));
      }
      CHECK(bad == 0);
    }
}

TEST_CASE("bf16 batch norm rows: a block past float's range is summed again in double, and NaN is kept") {
  const uint16_t big = BFloat16(2e19f).bits, nan = BFloat16(std::nanf("")).bits;
  for (const cpu::Bf16BatchNormRows* rows : widths_here()) {
    CAPTURE(rows->width);
    std::vector<uint16_t> x(100, BFloat16(1.0f).bits);
    x[70] = big;  // its square, 4e38, is past float's largest value
    const double want = (2e19 - 1) * (2e19 - 1);
    CHECK(rows->squares(x.data(), 100, 1.0f) == doctest::Approx(want).epsilon(1e-2));
    CHECK(std::isfinite(rows->squares(x.data(), 100, 1.0f)));
    x[3] = nan;
    CHECK(std::isnan(rows->sum(x.data(), 100)));
    std::vector<uint16_t> y(100);
    const cpu::BnAffine k{1.0f, 0.0f, 0.0f};
    rows->forward(x.data(), nullptr, y.data(), 100, &k, true);
    CHECK(std::isnan(value(y[3])));  // the ReLU keeps a NaN, as UnaryOp::Relu
    CHECK(value(y[0]) == 1.0);
  }
}

TEST_CASE("batch_norm_relu on bf16: wide_bf16_batch_norm off and on agree, the same bits on 1 and 2 threads") {
  Generator gen(23);
  // 58905 values: past the grain of the elementwise passes (32768) and of the channel sums (7 channels
  // of 8415), so two threads split both, the elementwise ones inside a row
  const Tensor x0 = (randn({33, 7, 15, 17}, {}, &gen) * 2.0 + 1.0).to(kBF16);
  const Tensor dy = randn({33, 7, 15, 17}, {}, &gen).to(kBF16);
  const Tensor w0 = rand({7}, {}, &gen) + 0.5, b0 = randn({7}, {}, &gen);
  auto run = [&](bool wide) {
    toggles::Scoped flip(toggles::Toggle::wide_bf16_batch_norm, wide);
    Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
           b = b0.clone().requires_grad_(true);
    Tensor y = F::batch_norm_relu(x, Tensor(), Tensor(), w, b, true);
    y.backward(dy);
    return std::vector<std::vector<float>>{y.to(kF32).to_vector<float>(), x.grad().to(kF32).to_vector<float>(),
                                           w.grad().to_vector<float>(), b.grad().to_vector<float>()};
  };
  const auto off = run(false), on = run(true);
  for (size_t k = 0; k < off.size(); ++k) {
    CAPTURE(k);
    REQUIRE(off[k].size() == on[k].size());
    double err = 0;  // relative to max(1, |off|): a bf16 rounding apart at most
    for (size_t i = 0; i < off[k].size(); ++i)
      err = std::max(err, std::abs(double(on[k][i]) - off[k][i]) / std::max(1.0, std::abs(double(off[k][i]))));
    CHECK(err <= 1.6e-2);
  }
  const int threads = get_num_threads();
  set_num_threads(1);
  const auto one = run(true);
  set_num_threads(std::max(threads, 2));
  const auto two = run(true);
  set_num_threads(threads);
  for (size_t k = 0; k < one.size(); ++k) CHECK(one[k] == two[k]);
}
