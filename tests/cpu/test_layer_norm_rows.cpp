// The layer norm row loops (cpu/layer_norm_rows.h) at every width this CPU runs (4, 8, 16 floats)
// against double math: row lengths around each width and the sum block, a row with a large mean; the
// parameter gradients with the same bits at every width; and F::layer_norm with wide_layer_norm off
// and on, forward and gradients.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/layer_norm_rows.h"
#include "nn/functional.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

std::vector<const cpu::LayerNormRows*> widths_here() {
  std::vector<const cpu::LayerNormRows*> w{&cpu::layer_norm_rows4()};
  if (cpu::has_avx2_fma()) w.push_back(&cpu::layer_norm_rows8());
  if (cpu::has_avx512f()) w.push_back(&cpu::layer_norm_rows16());
  return w;
}

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("layer norm rows: statistics, output and input gradient match double math at every width") {
  std::mt19937 rng(11);
  for (const cpu::LayerNormRows* rows : widths_here()) {
    for (int64_t C : {1, 3, 4, 15, 16, 17, 100, 255, 256, 257, 768, 1000}) {
      for (float shift : {0.0f, 300.0f}) {
        CAPTURE(rows->width);
        CAPTURE(C);
        CAPTURE(shift);
        const size_t n = size_t(C);
        std::vector<float> x = uniform(n, -2, 2, rng), w = uniform(n, 0.5f, 1.5f, rng), b = uniform(n, -1, 1, rng),
                           g = uniform(n, -1, 1, rng);
        for (float& v : x) v += shift;
        const double eps = 1e-5;
        double m = 0, var = 0;
        for (float v : x) m += v;
        m /= double(C);
        for (float v : x) var += (v - m) * (v - m);
        var /= double(C);
        const double rs = 1.0 / std::sqrt(var + eps);
        std::vector<float> y(n), gx(n);
        float got_m, got_rs;
        rows->forward(x.data(), y.data(), C, w.data(), b.data(), eps, got_m, got_rs);
        CHECK(double(got_m) == doctest::Approx(m).epsilon(1e-6));
        CHECK(double(got_rs) == doctest::Approx(rs).epsilon(C == 1 ? 1e-6 : 2e-4));
        double sh = 0, shx = 0;
        for (size_t j = 0; j < n; ++j) {
          const double h = double(g[j]) * w[j], xhat = (x[j] - m) * rs;
          sh += h, shx += h * xhat;
        }
        rows->backward(x.data(), g.data(), C, got_m, got_rs, w.data(), gx.data());
        double y_err = 0, gx_err = 0;  // the worst error over the row, relative to max(1, |want|)
        for (size_t j = 0; j < n; ++j) {
          const double xhat = (double(x[j]) - double(got_m)) * double(got_rs);
          const double want_y = xhat * w[j] + b[j];
          const double want_gx = double(got_rs) * (double(g[j]) * w[j] - sh / double(C) - xhat * shx / double(C));
          y_err = std::max(y_err, std::abs(double(y[j]) - want_y) / std::max(1.0, std::abs(want_y)));
          gx_err = std::max(gx_err, std::abs(double(gx[j]) - want_gx) / std::max(1.0, std::abs(want_gx)));
        }
        CHECK(y_err <= 1e-5);
        CHECK(gx_err <= 1e-4);
      }
    }
  }
}

TEST_CASE("layer norm rows: the parameter gradients have the same bits at every width") {
  std::mt19937 rng(12);
  for (int64_t C : {1, 7, 16, 33, 768}) {
    CAPTURE(C);
    const size_t n = size_t(C);
    const std::vector<float> x = uniform(n, -3, 3, rng), g = uniform(n, -1, 1, rng);
    std::vector<double> want_w(n, 0.25), want_b(n, -0.5);
    for (size_t c = 0; c < n; ++c) {
      want_w[c] += double(g[c] * ((x[c] - 0.3f) * 1.7f));
      want_b[c] += double(g[c]);
    }
    for (const cpu::LayerNormRows* rows : widths_here()) {
      CAPTURE(rows->width);
      std::vector<double> sw(n, 0.25), sb(n, -0.5);
      rows->param_grads(x.data(), g.data(), C, 0.3f, 1.7f, sw.data(), sb.data());
      CHECK(sw == want_w);
      CHECK(sb == want_b);
    }
  }
}

TEST_CASE("layer_norm: wide_layer_norm off and on agree, forward and gradients") {
  Generator gen(13);
  const Tensor x0 = randn({37, 300}, {}, &gen) * 2.0 + 5.0, dy = randn({37, 300}, {}, &gen);
  const Tensor w0 = rand({300}, {}, &gen) + 0.5, b0 = randn({300}, {}, &gen);
  std::vector<std::vector<float>> runs[2];
  for (bool wide : {false, true}) {
    toggles::set_wide_layer_norm(wide);
    Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
           b = b0.clone().requires_grad_(true);
    Tensor y = F::layer_norm(x, {300}, w, b);
    y.backward(dy);
    runs[wide] = {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>(),
                  b.grad().to_vector<float>()};
  }
  toggles::set_wide_layer_norm(true);
  for (size_t k = 0; k < 4; ++k) {
    CAPTURE(k);
    REQUIRE(runs[0][k].size() == runs[1][k].size());
    double err = 0;  // relative to max(1, |off|)
    for (size_t i = 0; i < runs[0][k].size(); ++i)
      err = std::max(err,
                     std::abs(double(runs[1][k][i]) - runs[0][k][i]) / std::max(1.0, std::abs(double(runs[0][k][i]))));
    CHECK(err <= 1e-4);
  }
}
