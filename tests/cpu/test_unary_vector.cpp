// The CPU's vectorised exp, tanh, sigmoid, silu, both GELUs and their derivatives
// (cpu/vec_math.h) over the whole float range, in units in the last place against double
// math, at every width (4 floats on SSE2, 8 on AVX2+FMA, 16 on AVX-512F) and through the tensor ops: overflow to
// inf, subnormal results, infinities, NaN, and the same answer wherever an element sits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/vec_map.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "tensor/float_mode.h"
#include "switches/list/toggles.h"

using namespace mdl;
using cpu::VecFn;

namespace {

using Floats = std::vector<float>;

// Distance in representable floats between got and the float nearest want; NaN matches NaN.
int64_t ulps(float got, double want) {
  const float w = float(want);
  if (std::isnan(got) || std::isnan(w)) return std::isnan(got) && std::isnan(w) ? 0 : INT64_MAX;
  if (got == w) return 0;
  int32_t a, b;
  std::memcpy(&a, &got, 4);
  std::memcpy(&b, &w, 4);
  const int64_t ka = a < 0 ? -int64_t(a & 0x7fffffff) : a, kb = b < 0 ? -int64_t(b & 0x7fffffff) : b;
  return std::abs(ka - kb);
}

constexpr double kK = 0.7978845608028654, kC = 0.044715;
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(kK * (x + kC * x * x * x))); }
double gelu_tanh_grad_ref(double x) {
  const double t = std::tanh(kK * (x + kC * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kK * (1 + 3 * kC * x * x);
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_grad_ref(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

struct Fn {
  std::string name;
  VecFn fn;
  std::function<Tensor(const Tensor&)> op;  // the tensor op that runs it (none for the derivative)
  std::function<double(double)> ref;
  int64_t limit;  // ulp
};

const std::vector<Fn>& fns() {
  static const std::vector<Fn> f = {
      {"exp", VecFn::Exp, [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, 1},
      {"tanh", VecFn::Tanh, [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 2},
      {"sigmoid", VecFn::Sigmoid, [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, 2},
      {"silu", VecFn::Silu, [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, 3},
      {"gelu", VecFn::Gelu, [](const Tensor& x) { return gelu(x); }, gelu_ref, 4},
      {"gelu_grad", VecFn::GeluGrad, nullptr, gelu_grad_ref, 4},
      {"gelu_tanh", VecFn::GeluTanh, [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref, 4},
      {"gelu_tanh_grad", VecFn::GeluTanhGrad, nullptr, gelu_tanh_grad_ref, 8},
  };
  return f;
}

Floats sweep() {
  Floats xs;
  for (double v = -110; v <= 110; v += 0.00731) xs.push_back(float(v));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, 0.6249f, 0.625f, -0.625f, 88.72f, 88.73f, -87.4f, -87.5f,
                  -100.0f, -103.9f, -104.5f, inf, -inf})
    xs.push_back(v);
  return xs;
}

// The worst error of got against f.ref over xs, with where it happened.
std::string worst_error(const Fn& f, const Floats& xs, const Floats& got, int64_t& worst) {
  worst = 0;
  float at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = f.ref(double(xs[i]));
    // Results below 1e-30 in magnitude are compared absolutely (silu and gelu_tanh of large
    // negative x are -0 or subnormal, where ulps say nothing). gelu_tanh for x < 0 is
    // x (1 + tanh) / 2 with tanh near -1, and its derivative has the same (1 + t) term: no float
    // formula gets them to a few ulp of the result, so their error is counted in ulps of x.
    int64_t u = std::abs(want) < 1e-30 && std::abs(got[i]) < 1e-30 ? 0 : ulps(got[i], want);
    // The exact GELU's erf is accurate to 1.5e-7 absolute (vec_math.h), so its derivative, which
    // crosses zero near x = -0.75, is held to an absolute error, in ulps of 1.
    if (f.name.rfind("gelu", 0) == 0 && xs[i] < 0 && std::isfinite(xs[i]))
      u = int64_t(std::abs(double(got[i]) - want) / (std::max(std::abs(double(xs[i])), 1.0) * 0x1p-23));
    if (f.name == "gelu_grad" && std::isfinite(xs[i])) u = int64_t(std::abs(double(got[i]) - want) / 0x1p-23);
    if (u > worst) worst = u, at = xs[i];
  }
  return f.name + ": worst " + std::to_string(worst) + " ulp at x = " + std::to_string(at);
}

}  // namespace

TEST_CASE("unary vector math: within a few ulp over the float range at every width and through the ops") {
  const Floats xs = sweep();
  for (const Fn& f : fns()) {
    std::vector<std::pair<std::string, Floats>> runs;
    Floats o(xs.size());
    cpu::vec_map4(f.fn, o.data(), xs.data(), int64_t(xs.size()));
    runs.emplace_back("4 floats", o);
    if (cpu::has_avx2_fma()) {
      cpu::vec_map8(f.fn, o.data(), xs.data(), int64_t(xs.size()));
      runs.emplace_back("8 floats (AVX2)", o);
    }
    if (cpu::has_avx512f()) {
      cpu::vec_map16(f.fn, o.data(), xs.data(), int64_t(xs.size()));
      runs.emplace_back("16 floats (AVX-512F)", o);
    }
    if (f.op) runs.emplace_back("tensor op", f.op(from_vector(xs, {int64_t(xs.size())})).to_vector<float>());
    for (const auto& [how, got] : runs) {
      int64_t worst = 0;
      const std::string what = worst_error(f, xs, got, worst);
      INFO(how, ": ", what);
      CHECK(worst <= f.limit);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (bool flush : {false, true}) {
    toggles::set_flush_denormal(flush);
    const Floats e = exp(from_vector(Floats{89.0f, -inf, inf, -104.0f, -100.0f}, {5})).to_vector<float>();
    CAPTURE(flush);
    CHECK(e[0] == inf);
    CHECK(e[1] == 0.0f);
    CHECK(e[2] == inf);
    CHECK(e[3] == 0.0f);
    if (flush) {
      CHECK(e[4] == 0.0f);  // a subnormal result, flushed
    } else {
      CHECK(e[4] > 0.0f);  // the vector exp reaches the subnormals itself
      CHECK(e[4] < std::numeric_limits<float>::min());
    }
  }
  toggles::set_flush_denormal(true);
}

// 16 floats apply exp's 2^n with one VSCALEFPS, 8 floats with two multiplies: each rounds once, so the
// two widths agree bit for bit, subnormal results and overflow included, with denormals kept or flushed.
TEST_CASE("unary vector math: exp on 16 floats has the bits of 8" *
          doctest::skip(!cpu::has_avx512f() || !cpu::has_avx2_fma())) {
  Floats xs = sweep();
  for (double v = -104.5; v <= -85; v += 0.0173) xs.push_back(float(v));  // results around the smallest normal
  for (bool flush : {false, true}) {
    toggles::set_flush_denormal(flush);
    sync_float_mode();
    for (VecFn fn : {VecFn::Exp, VecFn::Sigmoid, VecFn::Gelu}) {
      Floats o8(xs.size()), o16(xs.size());
      cpu::vec_map8(fn, o8.data(), xs.data(), int64_t(xs.size()));
      cpu::vec_map16(fn, o16.data(), xs.data(), int64_t(xs.size()));
      CAPTURE(flush);
      CAPTURE(int(fn));
      CHECK(std::memcmp(o8.data(), o16.data(), xs.size() * sizeof(float)) == 0);
    }
  }
  toggles::set_flush_denormal(true);
  sync_float_mode();
}

TEST_CASE("unary vector math: NaN stays NaN, and an element's result does not depend on its position") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Fn& f : fns()) {
    if (!f.op) continue;
    CHECK_MESSAGE(std::isnan(f.op(from_vector(Floats{1, nan, 2, 3, nan}, {5})).to_vector<float>()[1]), f.name);
    const float v = 0.8123f;
    const float alone = f.op(from_vector(Floats{v}, {1})).to_vector<float>()[0];
    for (int n = 1; n <= 17; ++n)
      for (int at = 0; at < n; ++at) {
        Floats xs(size_t(n), -1.5f);
        xs[size_t(at)] = v;
        CHECK_MESSAGE(f.op(from_vector(xs, {n})).to_vector<float>()[size_t(at)] == alone, f.name, " n=", n, " at ", at);
      }
  }
}

// tanh is odd to the sign of zero, as std::tanh and PyTorch: tanh(-0) = -0, at every width, in the
// tail and through the op.
TEST_CASE("unary vector math: tanh keeps the sign of zero") {
  const Floats xs(37, -0.0f);
  std::vector<std::pair<std::string, Floats>> runs;
  Floats o(xs.size());
  cpu::vec_map4(VecFn::Tanh, o.data(), xs.data(), int64_t(xs.size()));
  runs.emplace_back("4 floats", o);
  if (cpu::has_avx2_fma()) {
    cpu::vec_map8(VecFn::Tanh, o.data(), xs.data(), int64_t(xs.size()));
    runs.emplace_back("8 floats (AVX2)", o);
  }
  if (cpu::has_avx512f()) {
    cpu::vec_map16(VecFn::Tanh, o.data(), xs.data(), int64_t(xs.size()));
    runs.emplace_back("16 floats (AVX-512F)", o);
  }
  runs.emplace_back("tensor op", tanh(from_vector(xs, {37})).to_vector<float>());
  runs.emplace_back("tensor op, +0", tanh(from_vector(Floats(37, 0.0f), {37})).to_vector<float>());
  for (const auto& [how, got] : runs) {
    INFO(how);
    const bool negative = how != "tensor op, +0";
    for (float v : got) CHECK((v == 0.0f && std::signbit(v) == negative));
  }
}

TEST_CASE("gelu backward: one fused pass against the double formula, on strided and broadcast operands") {
  for (const bool tanh_approx : {false, true}) {
    const std::string approx = tanh_approx ? "tanh" : "none";
    for (DType dt : {kF32, kF16, kBF16, kF64}) {
      CAPTURE(approx);
      CAPTURE(dt);
      Generator gen(5);
      const Tensor base = (randn({37, 23}, {}, &gen) * 3.0).to(dt);
      const Tensor x = base.t().detach().requires_grad_(true);  // (23, 37), transposed strides
      const Tensor y = gelu(x, approx);
      const Tensor g = randn({37}, {}, &gen).to(dt);  // broadcast over rows: stride 0 along dim 0
      y.backward(expand(g, y.shape()));
      const std::vector<double> xv = x.to(kF64).contiguous().to_vector<double>(), gv = g.to(kF64).to_vector<double>();
      const std::vector<double> got = x.grad().to(kF64).contiguous().to_vector<double>();
      const double tol = dt == kF64 ? 1e-12 : dt == kF32 ? 2e-6 : dt == kF16 ? 4e-3 : 3e-2;
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double xi = xv[i], d = tanh_approx ? gelu_tanh_grad_ref(xi) : gelu_grad_ref(xi);
        worst = std::max(worst, std::abs(got[i] - gv[i % 37] * d) / (1 + std::abs(gv[i % 37] * d)));
      }
      CHECK(worst <= tol);
    }
  }
}
