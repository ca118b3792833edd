// softmax and log_softmax, forward and backward, against double-precision loops: every dim (rows
// and column tiles), negative dims, non-contiguous inputs, f32 f64 f16 bf16, huge logits, -inf
// and NaN, 0-dim and zero-size tensors, threaded sizes, finite differences, and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"
#include "ops/native/native.h"  // native::softmax_backward

using namespace mdl;
using namespace mdl::test;
using V = std::vector<double>;

namespace {

// Calls f(base, stride, n) for each line of `shape` along dim, offsets into row-major values.
template <class F>
void for_lines(const Shape& shape, int64_t dim, const F& f) {
  const Shape st = contiguous_strides(shape);
  const int64_t n = shape[size_t(dim)], total = shape_numel(shape);
  if (n == 0) return;
  for (int64_t m = 0; m < total / n; ++m) {
    int64_t rem = m, base = 0;
    for (int64_t e = int64_t(shape.size()) - 1; e >= 0; --e) {
      if (e == dim) continue;
      base += rem % shape[size_t(e)] * st[size_t(e)];
      rem /= shape[size_t(e)];
    }
    f(base, st[size_t(dim)], n);
  }
}

V ref_softmax(const V& x, const Shape& shape, int64_t dim, bool log) {
  V y(x.size());
  for_lines(shape, dim, [&](int64_t b, int64_t s, int64_t n) {
    double mx = -INFINITY;
    for (int64_t k = 0; k < n; ++k) mx = std::max(mx, x[size_t(b + k * s)]);
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += std::exp(x[size_t(b + k * s)] - mx);
    for (int64_t k = 0; k < n; ++k) {
      const double z = x[size_t(b + k * s)] - mx;
      y[size_t(b + k * s)] = log ? z - std::log(sum) : std::exp(z) / sum;
    }
  });
  return y;
}

V ref_backward(const V& g, const V& y, const Shape& shape, int64_t dim, bool log) {
  V gi(g.size());
  for_lines(shape, dim, [&](int64_t b, int64_t s, int64_t n) {
    double acc = 0;
    for (int64_t k = 0; k < n; ++k) acc += log ? g[size_t(b + k * s)] : g[size_t(b + k * s)] * y[size_t(b + k * s)];
    for (int64_t k = 0; k < n; ++k) {
      const size_t i = size_t(b + k * s);
      gi[i] = log ? g[i] - std::exp(y[i]) * acc : y[i] * (g[i] - acc);
    }
  });
  return gi;
}

double tol_for(DType t) { return t == kF16 ? 2e-3 : t == kBF16 ? 1.6e-2 : t == kF32 ? 2e-6 : 1e-12; }

Tensor run(const Tensor& x, int64_t dim, bool log) { return log ? log_softmax(x, dim) : softmax(x, dim); }

std::vector<std::pair<std::string, Tensor>> layouts(DType t) {
  std::vector<std::pair<std::string, Tensor>> r;
  r.emplace_back("contiguous", randn({3, 4, 5}, t) * 3.0);
  r.emplace_back("permuted", randn({5, 3, 4}, t).permute({1, 2, 0}));
  r.emplace_back("stepped", randn({3, 9, 5}, t).slice(1, 1, 9, 2));
  r.emplace_back("expanded", randn({3, 1, 5}, t).expand({3, 4, 5}));
  return r;
}

}  // namespace

TEST_CASE("softmax: every dim, layout and dtype against a double loop") {
  manual_seed(11);
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (auto& [layout, x] : layouts(t))
      for (int64_t dim = -3; dim < 3; ++dim)
        for (bool log : {false, true}) {
          const Tensor y = run(x, dim, log);
          const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(t) + " " + layout +
                                   " dim " + std::to_string(dim);
          CHECK(y.dtype() == t);
          CHECK(y.shape() == x.shape());
          CHECK(y.is_contiguous());
          const double tol = tol_for(t);
          const V want = ref_softmax(x.to_vector<double>(), x.shape(), dim < 0 ? dim + 3 : dim, log);
          check_close(y, want, {.rtol = tol, .atol = tol}, what);
        }
}

TEST_CASE("softmax: long rows, wide column tiles and threaded sizes") {
  manual_seed(12);
  struct Case {
    Shape shape;
    int64_t dim;
    DType t;
  };
  const Case cases[] = {
      {{1024, 1024}, 1, kF32}, {{1024, 1024}, 0, kF32}, {{3, 5000}, 1, kF32},    {{2, 7, 300}, 1, kF32},
      {{2, 7, 300}, 1, kF16},  {{64, 10}, 1, kF32},     {{4, 33, 17}, 2, kF64},  {{2, 3000, 9}, 1, kF16},
      {{8, 1}, 1, kF32},       {{1, 8}, 0, kF32},       {{513, 1000}, 1, kBF16},
  };
  for (const Case& c : cases)
    for (bool log : {false, true}) {
      const Tensor x = randn(c.shape, c.t) * 4.0;
      const std::string what = shape_str(c.shape) + " dim " + std::to_string(c.dim) + " " + dtype_name(c.t) +
                               (log ? " log" : "");
      check_close(run(x, c.dim, log), ref_softmax(x.to_vector<double>(), c.shape, c.dim, log),
                  {.rtol = tol_for(c.t), .atol = tol_for(c.t)}, what);
    }
}

TEST_CASE("softmax: huge logits, -inf, NaN, 0-dim and zero-size") {
  manual_seed(13);
  // Logits of 1e4: no overflow, rows still sum to 1; log_softmax stays finite.
  for (int64_t dim : {0, 1}) {
    const Tensor x = randn({6, 50}) * 1e4;
    const std::vector<float> y = softmax(x, dim).to_vector<float>();
    for (float v : y) CHECK(std::isfinite(v));
    const std::vector<float> s = sum(softmax(x, dim), {dim}).to_vector<float>();
    for (float v : s) CHECK(v == doctest::Approx(1.0).epsilon(1e-5));
    for (float v : log_softmax(x, dim).to_vector<float>()) CHECK(std::isfinite(v));
    check_close(log_softmax(x, dim), ref_softmax(x.to_vector<double>(), {6, 50}, dim, true),
                {.rtol = 1e-6, .atol = 1e-2}, "log_softmax 1e4");
  }
  const Tensor same = full({2, 5}, 1e4);
  for (float v : softmax(same, 1).to_vector<float>()) CHECK(v == doctest::Approx(0.2));
  for (float v : softmax(full({2, 5}, -1e4), 1).to_vector<float>()) CHECK(v == doctest::Approx(0.2));

  // -inf masks a position; a NaN poisons its row only.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor m = from_vector<float>({1, -inf, 2, -inf, 0, 0, 0, 0, 5, NAN, 1, 2}, {3, 4});
  const std::vector<float> ym = softmax(m, 1).to_vector<float>();
  CHECK(ym[1] == 0.0f);
  CHECK(ym[3] == 0.0f);
  CHECK(ym[0] == doctest::Approx(std::exp(-1.0) / (1 + std::exp(-1.0))));
  for (int i = 4; i < 8; ++i) CHECK(ym[size_t(i)] == doctest::Approx(0.25));
  for (int i = 8; i < 12; ++i) CHECK(std::isnan(ym[size_t(i)]));
  const std::vector<float> lm = log_softmax(m, 1).to_vector<float>();
  CHECK(lm[1] == -inf);
  CHECK(std::isnan(lm[9]));
  const std::vector<float> ymc = softmax(m.t().contiguous(), 0).to_vector<float>();  // the tile path
  CHECK(ymc[3] == 0.0f);
  CHECK(std::isnan(ymc[2 * 3 + 2]));
  CHECK(ymc[2 * 3 + 1] == doctest::Approx(0.25));

  const Tensor s = scalar_tensor(3.0);
  CHECK(softmax(s, 0).dim() == 0);
  CHECK(softmax(s, -1).item<float>() == 1.0f);
  CHECK(log_softmax(s, 0).item<float>() == 0.0f);
  CHECK(softmax(zeros({0, 5}), 1).shape() == Shape{0, 5});
  CHECK(log_softmax(zeros({3, 0}), 1).shape() == Shape{3, 0});
  CHECK(softmax(zeros({3, 0}), 0).numel() == 0);
  CHECK(softmax(ones({4, 1}), 1).to_vector<float>() == std::vector<float>(4, 1.0f));
}

TEST_CASE("softmax: backward against the formula in double, every dim and dtype") {
  manual_seed(14);
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (int64_t dim = -3; dim < 3; ++dim)
      for (bool log : {false, true}) {
        const Tensor x = randn({3, 4, 5}, t);
        const Tensor y = run(x, dim, log);
        const Tensor g = randn({5, 4, 3}, t).permute({2, 1, 0});  // a non-contiguous gradient
        const Tensor gi = native::softmax_backward(g, y, dim, log);
        CHECK(gi.shape() == x.shape());
        CHECK(gi.dtype() == t);
        const double tol = tol_for(t) * 2;
        check_close(gi,
                    ref_backward(g.to_vector<double>(), y.to_vector<double>(), x.shape(), dim < 0 ? dim + 3 : dim, log),
                    {.rtol = tol, .atol = tol},
                    std::string(dtype_name(t)) + " dim " + std::to_string(dim) + (log ? " log" : ""));
      }
  // Big enough to thread, rows and tiles.
  for (int64_t dim : {0, 1})
    for (bool log : {false, true}) {
      const Tensor x = randn({700, 600});
      const Tensor y = run(x, dim, log);
      const Tensor g = randn({700, 600});
      check_close(native::softmax_backward(g, y, dim, log),
                  ref_backward(g.to_vector<double>(), y.to_vector<double>(), {700, 600}, dim, log),
                  {.rtol = 1e-5, .atol = 1e-6}, "big dim " + std::to_string(dim));
    }
}

TEST_CASE("softmax: backward matches finite differences in f64") {
  manual_seed(15);
  for (int64_t dim : {0, 1, 2})
    for (bool log : {false, true}) {
      const Tensor x = randn({2, 3, 4}, kF64);
      const Tensor w = randn({2, 3, 4}, kF64);  // loss = sum(w * f(x)), so dloss/df = w
      const V xv = x.to_vector<double>(), wv = w.to_vector<double>();
      const V gi = native::softmax_backward(w, run(x, dim, log), dim, log).to_vector<double>();
      const double h = 1e-6;
      for (size_t i = 0; i < xv.size(); ++i) {
        V xp = xv, xm = xv;
        xp[i] += h;
        xm[i] -= h;
        const V yp = run(from_vector<double>(xp, {2, 3, 4}), dim, log).to_vector<double>();
        const V ym = run(from_vector<double>(xm, {2, 3, 4}), dim, log).to_vector<double>();
        double lp = 0, lm = 0;
        for (size_t j = 0; j < xv.size(); ++j) lp += wv[j] * yp[j], lm += wv[j] * ym[j];
        CHECK_MESSAGE(gi[i] == doctest::Approx((lp - lm) / (2 * h)).epsilon(1e-6), "dim ", dim, log ? " log" : "",
                      " at ", i);
      }
    }
}

TEST_CASE("softmax: error messages") {
  CHECK_THROWS_WITH_AS(softmax(randint(0, 5, {3}, kI64), 0),
                       doctest::Contains("softmax: expected a floating dtype (f32, f16, bf16, f64), got i64"), Error);
  CHECK_THROWS_WITH_AS(log_softmax(ones({3}, kBool), 0), doctest::Contains("log_softmax: expected a floating dtype"),
                       Error);
  CHECK_THROWS_WITH_AS(softmax(ones({2, 3}), 2),
                       doctest::Contains("softmax: dim 2 out of range for a tensor of 2 dims"), Error);
  CHECK_THROWS_WITH_AS(log_softmax(ones({2, 3}), -3), doctest::Contains("log_softmax: dim -3 out of range"), Error);
  const Tensor y = softmax(ones({2, 3}), 1);
  CHECK_THROWS_WITH_AS(native::softmax_backward(ones({3, 2}), y, 1, false),
                       doctest::Contains("softmax_backward: grad_output [3,2] f32 on cpu does not match output [2,3]"),
                       Error);
  CHECK_THROWS_WITH_AS(native::softmax_backward(ones({2, 3}, kF64), y, 1, true),
                       doctest::Contains("log_softmax_backward: grad_output [2,3] f64"), Error);
  CHECK_THROWS_WITH_AS(native::softmax_backward(ones({2, 3}), y, 5, false),
                       doctest::Contains("softmax_backward: dim 5 out of range"), Error);
}
