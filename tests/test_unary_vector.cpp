// The CPU's vectorised exp, tanh, sigmoid, silu and gelu_tanh (tensor/cpu/vec4.h) over the whole
// float range, in units in the last place against double math: overflow to inf, subnormal
// results, infinities, NaN, and the same answer wherever an element sits (vector body or tail).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tensor/factory.h"
#include "tensor/ops.h"

using namespace mdl;

namespace {

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

struct Case {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref},
  };
  return c;
}

}  // namespace

TEST_CASE("unary vector math: exp, tanh, sigmoid, silu, gelu_tanh within a few ulp over the float range") {
  std::vector<float> xs;
  for (double v = -110; v <= 110; v += 0.00731) xs.push_back(float(v));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, 0.6249f, 0.625f, -0.625f, 88.72f, 88.73f, -87.4f, -87.5f,
                  -100.0f, -103.9f, -104.5f, inf, -inf})
    xs.push_back(v);
  const Tensor x = from_vector(xs, {int64_t(xs.size())});
  const std::vector<int64_t> limit = {1, 2, 2, 3, 4};
  for (size_t k = 0; k < cases().size(); ++k) {
    const Case& c = cases()[k];
    const std::vector<float> got = c.op(x).to_vector<float>();
    int64_t worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.ref(double(xs[i]));
      // Results below 1e-30 in magnitude are compared absolutely: silu and gelu_tanh of large
      // negative x are -0 or a subnormal in float, where ulps say nothing. gelu_tanh for x < 0 is
      // x (1 + tanh) / 2 with tanh near -1, which no float formula gets to a few ulp: its error is
      // counted in ulps of x instead.
      int64_t u = std::abs(want) < 1e-30 && std::abs(got[i]) < 1e-30 ? 0 : ulps(got[i], want);
      if (c.name == "gelu_tanh" && xs[i] < 0 && std::isfinite(xs[i]))
        u = int64_t(std::abs(double(got[i]) - want) / (std::abs(double(xs[i])) * 0x1p-23));
      if (u > worst) worst = u, worst_x = xs[i];
    }
    INFO(c.name, ": worst ", worst, " ulp at x = ", worst_x);
    CHECK(worst <= limit[k]);
  }
  const std::vector<float> e = exp(from_vector(std::vector<float>{89.0f, -inf, inf, -104.0f, -100.0f}, {5})).to_vector<float>();
  CHECK(e[0] == inf);
  CHECK(e[1] == 0.0f);
  CHECK(e[2] == inf);
  CHECK(e[3] == 0.0f);
  CHECK(e[4] > 0.0f);  // subnormal, not flushed
  CHECK(e[4] < std::numeric_limits<float>::min());
}

TEST_CASE("unary vector math: NaN stays NaN, and an element's result does not depend on its position") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : cases()) {
    CHECK_MESSAGE(std::isnan(c.op(from_vector(std::vector<float>{1, nan, 2, 3, nan}, {5})).to_vector<float>()[1]), c.name);
    const float v = 0.8123f;
    const float alone = c.op(from_vector(std::vector<float>{v}, {1})).to_vector<float>()[0];
    for (int n = 1; n <= 9; ++n)
      for (int at = 0; at < n; ++at) {
        std::vector<float> xs(size_t(n), -1.5f);
        xs[size_t(at)] = v;
        CHECK_MESSAGE(c.op(from_vector(xs, {n})).to_vector<float>()[size_t(at)] == alone, c.name, " n=", n, " at ", at);
      }
  }
}
