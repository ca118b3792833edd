// The f32 row loops of softmax, log_softmax and the fused cross-entropy (cpu/softmax_rows.h) at
// every width this CPU runs (4, 8, 16 floats) against double math: row lengths around each width
// and past the float blocks, a shifted row, exact integer sums, NaN; and the ops over long rows
// with the wide_softmax switch off and on, forward and gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/softmax_rows.h"
#include "nn/functional.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"
#include "tests/support/test_util.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

std::vector<const cpu::SoftmaxRows*> widths_here() {
  std::vector<const cpu::SoftmaxRows*> w{&cpu::softmax_rows4()};
  if (cpu::has_avx2_fma()) w.push_back(&cpu::softmax_rows8());
  if (cpu::has_avx512f()) w.push_back(&cpu::softmax_rows16());
  return w;
}

}  // namespace

TEST_CASE("softmax rows: the loss's max, exp sums and gradient match double math at every width") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  for (const cpu::SoftmaxRows* rows : widths_here()) {
    for (int64_t C : {1, 3, 4, 7, 8, 15, 16, 17, 33, 100, 1023, 1024, 1025, 2100}) {
      for (float shift : {0.0f, 500.0f}) {
        CAPTURE(rows->width);
        CAPTURE(C);
        CAPTURE(shift);
        std::vector<float> p(static_cast<size_t>(C));
        for (float& v : p) v = u(rng) + shift;
        p[size_t(C / 2)] = shift + 9.0f;  // the row's max, anywhere from the first lane to the tail
        double m = -INFINITY, se = 0, sx = 0;
        for (float v : p) m = std::max(m, double(v));
        for (float v : p) {
          se += std::exp(double(v) - m);
          sx += double(v) - m;
        }
        const float got_m = rows->max(p.data(), C);
        CHECK(got_m == float(m));
        double got_se, got_sx;
        rows->sums(p.data(), C, got_m, got_se, got_sx);
        CHECK(got_se == doctest::Approx(se).epsilon(2e-6));
        CHECK(std::abs(got_sx - sx) <= 1e-5 * double(C) * 18.0);  // float sums of |x - m| <= 18
        // g (softmax - off), off a label-smoothing share, written in place over a copy of the row.
        const float logsum = float(std::log(se)), g = 0.75f, off = 0.01f;
        std::vector<float> out = p;
        rows->grad(out.data(), out.data(), C, got_m, logsum, g, off);
        double worst = 0;  // relative to the terms before they cancel
        for (int64_t c = 0; c < C; ++c) {
          const double e = std::exp(double(p[size_t(c)]) - m - double(logsum)), want = double(g) * (e - double(off));
          worst = std::max(worst, std::abs(double(out[size_t(c)]) - want) / (double(g) * (e + double(off))));
        }
        CHECK(worst < 1e-6);
      }
    }
    // Small integers sum exactly in float: every element counted once, from the first lane to the tail.
    for (int64_t C : {5, 16, 31, 1024, 2100}) {
      CAPTURE(C);
      std::vector<float> p(static_cast<size_t>(C));
      double se = 0, sx = 0;
      for (int64_t c = 0; c < C; ++c) {
        p[size_t(c)] = float(c % 3);
        se += std::exp(double(c % 3) - 2.0);
        sx += double(c % 3) - 2.0;
      }
      double got_se, got_sx;
      rows->sums(p.data(), C, 2.0f, got_se, got_sx);
      CHECK(got_sx == sx);
      CHECK(got_se == doctest::Approx(se).epsilon(2e-5));  // one element is over 1e-4 of the sum
    }
    // A NaN anywhere makes the max NaN: in the first vector, and in the tail.
    std::vector<float> p(37, 1.0f);
    p[2] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(rows->max(p.data(), 37)));
    p[2] = 1.0f;
    p[36] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(rows->max(p.data(), 37)));
  }
}

TEST_CASE("softmax rows: the fused cross_entropy over 3000 classes agrees with wide_softmax off and on") {
  Generator g(31);
  const int64_t N = 6, C = 3000;
  Tensor x = test::uniform({N, C}, g, -6, 6, kF32);
  Tensor t = from_vector<int64_t>({0, 2999, 1500, 17, -100, 2048});
  std::vector<std::vector<double>> loss, grad;
  for (bool wide : {false, true}) {
    toggles::Scoped scoped(toggles::Toggle::wide_softmax, wide);
    Tensor xl = x.clone().requires_grad_();
    Tensor l = F::cross_entropy(xl, t, {.label_smoothing = 0.1, .reduction = F::Reduction::Sum});
    l.backward();
    loss.push_back(test::values(l));
    grad.push_back(test::values(xl.grad()));
  }
  // Against double math: loss and softmax - (1 - ls) onehot - ls / C, per row.
  std::vector<double> xs = test::values(x), want_grad(size_t(N * C));
  std::vector<int64_t> tv = t.to_vector<int64_t>();
  double want_loss = 0;
  for (int64_t n = 0; n < N; ++n) {
    const double* r = xs.data() + n * C;
    double m = -INFINITY, s = 0, mean = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, r[c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(r[c] - m);
    const double lse = m + std::log(s);
    for (int64_t c = 0; c < C; ++c) mean += r[c] / double(C);
    if (tv[size_t(n)] == -100) continue;
    want_loss += 0.9 * (lse - r[tv[size_t(n)]]) + 0.1 * (lse - mean);
    for (int64_t c = 0; c < C; ++c)
      want_grad[size_t(n * C + c)] = std::exp(r[c] - lse) - 0.1 / double(C) - (c == tv[size_t(n)] ? 0.9 : 0.0);
  }
  for (size_t k = 0; k < 2; ++k) {
    CAPTURE(k);
    CHECK(loss[k][0] == doctest::Approx(want_loss).epsilon(1e-5));
    double worst = 0;
    for (size_t i = 0; i < want_grad.size(); ++i) worst = std::max(worst, std::abs(grad[k][i] - want_grad[i]));
    CHECK(worst < 1e-6);  // the gradient's entries are about 1/C = 3e-4, or -0.9 at a target
  }
}

TEST_CASE("softmax rows: softmax and log_softmax rows, forward and backward, match double math at every width") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  for (const cpu::SoftmaxRows* rows : widths_here())
    for (int64_t n : {1, 5, 16, 17, 255, 256, 257, 1000, 1024, 3001})
      for (bool log : {false, true}) {
        CAPTURE(rows->width);
        CAPTURE(n);
        CAPTURE(log);
        std::vector<float> x(static_cast<size_t>(n)), g(static_cast<size_t>(n)), y(x.size()), gi(x.size());
        for (float& v : x) v = u(rng);
        for (float& v : g) v = u(rng);
        double m = -INFINITY, s = 0;
        for (float v : x) m = std::max(m, double(v));
        for (float v : x) s += std::exp(double(v) - m);
        rows->forward(x.data(), y.data(), n, log);
        std::vector<double> want(x.size());
        double worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          want[i] = log ? double(x[i]) - m - std::log(s) : std::exp(double(x[i]) - m) / s;
          worst = std::max(worst, std::abs(double(y[i]) - want[i]) / (log ? 1.0 + std::abs(want[i]) : want[i]));
        }
        CHECK(worst < 2e-6);
        // Backward from the row's own output: softmax y (g - sum g y); log_softmax g - e^y sum g.
        rows->backward(g.data(), y.data(), gi.data(), n, log);
        double r = 0, scale = 0;
        for (size_t i = 0; i < x.size(); ++i) r += log ? double(g[i]) : double(g[i]) * double(y[i]);
        worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          const double yi = y[i], w = log ? g[i] - std::exp(yi) * r : yi * (g[i] - r);
          scale = log ? std::abs(double(g[i])) + std::exp(yi) * std::abs(r)
                      : yi * (std::abs(double(g[i])) + std::abs(r));
          worst = std::max(worst, std::abs(double(gi[i]) - w) / (scale + 1e-30));
        }
        CHECK(worst < 1e-5);
      }
}

TEST_CASE("softmax rows: softmax and log_softmax over rows of 3000 agree with wide_softmax off and on") {
  Generator g(33);
  Tensor x = test::uniform({5, 3000}, g, -8, 8, kF32), dy = test::uniform({5, 3000}, g, -1, 1, kF32);
  Tensor x64 = x.to(kF64);
  for (bool log : {false, true}) {
    Tensor want = log ? log_softmax(x64, 1) : softmax(x64, 1);
    Tensor xr = x64.clone().requires_grad_();
    sum((log ? log_softmax(xr, 1) : softmax(xr, 1)) * dy.to(kF64)).backward();
    const std::vector<double> want_y = test::values(want), want_g = test::values(xr.grad());
    for (bool wide : {false, true}) {
      CAPTURE(log);
      CAPTURE(wide);
      toggles::Scoped scoped(toggles::Toggle::wide_softmax, wide);
      Tensor xl = x.clone().requires_grad_();
      Tensor y = log ? log_softmax(xl, 1) : softmax(xl, 1);
      sum(y * dy).backward();
      const std::vector<double> got_y = test::values(y), got_g = test::values(xl.grad());
      double worst_y = 0, worst_g = 0;
      for (size_t i = 0; i < got_y.size(); ++i) {
        worst_y = std::max(worst_y, std::abs(got_y[i] - want_y[i]) / (log ? 1.0 + std::abs(want_y[i]) : want_y[i]));
        worst_g = std::max(worst_g, std::abs(got_g[i] - want_g[i]));
      }
      CHECK(worst_y < 2e-6);
      CHECK(worst_g < (log ? 2e-5 : 2e-6));  // log_softmax's gradient is dy - softmax * sum(dy), sum(dy) ~ 30
    }
  }
}
