// The off side of the kernel switches whose benchmark pairs run an op with the switch off and on
// (vector_math, branchless_select, fused_gelu_backward, fused_relu_backward): each op, with its switch off and on,
// against a plain reference at odd sizes and strided layouts, and each switch restored afterwards.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/gradcheck.h"
#include "kernels/gelu_math.h"
#include "ops/native/factory.h"
#include "nn/models/models.h"
#include "ops/ops.h"
#include "switches/switches.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::values;

namespace {

// Sets toggle `name` for the scope and restores its previous value, also when a check throws.
class SwitchGuard {
 public:
  SwitchGuard(std::string name, bool on) : name_(std::move(name)), was_(switches::get(name_)) {
    switches::set(name_, on);
  }
  ~SwitchGuard() { switches::set(name_, was_); }
  SwitchGuard(const SwitchGuard&) = delete;
  SwitchGuard& operator=(const SwitchGuard&) = delete;

 private:
  std::string name_;
  bool was_;
};

const int64_t kOddSizes[] = {1, 7, 257, 4099};  // a tail, one float block plus one, past a thread's chunk

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;   // in double
  std::function<float(float)> scalar;  // the one <cmath> call per element the switch off runs
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> c = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); },
       [](float x) { return std::exp(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); },
       [](float x) { return std::tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref,
       [](float x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_math::gelu<double>, gelu_math::gelu<float>},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_math::gelu_tanh<double>,
       gelu_math::gelu_tanh<float>},
  };
  return c;
}

// |got - want| within `rel` of want, plus an absolute floor scaled by |x| (GELU's negative side
// cancels 1 + erf, so its error is small against x, not against the result).
bool close(double got, double want, double x, double rel) {
  return std::abs(got - want) <= rel * (std::abs(want) + std::max(1.0, std::abs(x)));
}

}  // namespace

TEST_CASE("vector_math off: exp, tanh, sigmoid and both GELUs run one <cmath> call per element, correct either way") {
  for (const UnaryCase& c : unary_cases())
    for (int64_t n : kOddSizes)
      for (bool on : {false, true}) {
        CAPTURE(c.name);
        CAPTURE(n);
        CAPTURE(on);
        Generator gen(11);
        const Tensor x = randn({n}, {}, &gen) * 4.0;
        const std::vector<float> xs = x.to_vector<float>(), xh = x.to(kF16).to(kF32).to_vector<float>();
        std::vector<float> got, got_strided, got_f16;
        {
          SwitchGuard guard("vector_math", on);
          got = c.op(x).to_vector<float>();
          const Tensor wide = zeros({n, 3});
          wide.select(1, 1).copy_(x);
          got_strided = c.op(wide.select(1, 1)).to_vector<float>();  // a stride of 3: through a float block
          got_f16 = c.op(x.to(kF16)).to(kF32).to_vector<float>();
        }
        int bad = 0, differs_from_scalar = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float xi = xs[size_t(i)];
          const double want = c.ref(double(xi));
          bad += !close(got[size_t(i)], want, xi, 2e-6);
          bad += got_strided[size_t(i)] != got[size_t(i)];
          const double want_f16 = c.ref(double(xh[size_t(i)]));
          if (std::abs(want_f16) < 65504) bad += !close(got_f16[size_t(i)], want_f16, xi, 2e-3);  // else f16's inf
          differs_from_scalar += got[size_t(i)] != c.scalar(xi);
        }
        CHECK(bad == 0);
        if (!on) CHECK(differs_from_scalar == 0);            // off is exactly the libm loop
        if (on && n > 1000) CHECK(differs_from_scalar > 0);  // and on is not
      }
  CHECK(switches::get("vector_math"));
}

TEST_CASE("branchless_select off: where and masked_fill as a ternary loop, the same values as the bit select") {
  for (DType dt : {kF32, kF64, kF16, kI32, kI64, kU8, kBool})
    for (int64_t n : kOddSizes)
      for (bool on : {false, true}) {
        CAPTURE(dt);
        CAPTURE(n);
        CAPTURE(on);
        Generator gen(12);
        const Tensor c = gt(rand({n}, {}, &gen), scalar_tensor(0.5));
        const Tensor a = randint(0, 2, {n}, kI64, &gen).to(dt), b = randint(0, 100, {n}, kI64, &gen).to(dt);
        std::vector<double> w, mf;
        {
          SwitchGuard guard("branchless_select", on);
          w = where(c, a, b).to(kF64).to_vector<double>();
          mf = masked_fill(b, c, 1.0).to(kF64).to_vector<double>();
        }
        const std::vector<bool> cv = [&] {
          std::vector<bool> v;
          for (uint8_t u : c.to(kU8).to_vector<uint8_t>()) v.push_back(u != 0);
          return v;
        }();
        const std::vector<double> av = a.to(kF64).to_vector<double>(), bv = b.to(kF64).to_vector<double>();
        int bad = 0;
        for (size_t i = 0; i < size_t(n); ++i) {
          bad += w[i] != (cv[i] ? av[i] : bv[i]);
          bad += mf[i] != (cv[i] ? 1.0 : bv[i]);
        }
        CHECK(bad == 0);
      }
  CHECK(switches::get("branchless_select"));
}

TEST_CASE("fused_gelu_backward off: GELU's backward composed of ops, against the formula and gradcheck") {
  for (bool fused : {false, true})
    for (bool vector : {false, true})
      for (const bool tanh_approx : {false, true})
        for (DType dt : {kF32, kF64, kF16}) {
          const std::string approx = tanh_approx ? "tanh" : "none";
          CAPTURE(fused);
          CAPTURE(vector);
          CAPTURE(approx);
          CAPTURE(dt);
          SwitchGuard fuse("fused_gelu_backward", fused), vec("vector_math", vector);
          Generator gen(13);
          Tensor base = (randn({37, 23}, {}, &gen) * 3.0);
          base.data_ptr<float>()[5] = 0.0f;                                // x = 0: Phi(0) = 1/2 in the composed form
          const Tensor x = base.to(dt).t().detach().requires_grad_(true);  // (23, 37), transposed strides
          const Tensor g = randn({23, 37}, {}, &gen).to(dt);
          gelu(x, approx).backward(g);
          REQUIRE(x.grad().defined());
          CHECK(x.grad().dtype() == dt);
          const std::vector<double> xv = x.to(kF64).contiguous().to_vector<double>();
          const std::vector<double> gv = g.to(kF64).to_vector<double>();
          const std::vector<double> got = x.grad().to(kF64).contiguous().to_vector<double>();
          const double tol = dt == kF64 ? 1e-12 : dt == kF32 ? 4e-6 : 8e-3;
          int bad = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            const double d = tanh_approx ? gelu_math::gelu_tanh_grad(xv[i]) : gelu_math::gelu_grad(xv[i]);
            bad += std::abs(got[i] - gv[i] * d) > tol * (1 + std::abs(gv[i] * d));
          }
          CHECK(bad == 0);
          if (dt == kF64) {
            Generator g2(14);
            const Tensor xs = (randn({5, 7}, kF64, &g2) * 2.0).requires_grad_(true);
            const auto r = autograd::gradcheck([&](const std::vector<Tensor>& in) { return gelu(in[0], approx); },
                                               {xs});
            CHECK_MESSAGE(r.ok, r.report);
          }
        }
  // The two sides are different code: their f32 gradients differ in rounding somewhere.
  Generator gen(15);
  Tensor x = randn({4099}, {}, &gen).requires_grad_(true);
  std::vector<float> grads[2];
  for (bool fused : {false, true}) {
    SwitchGuard guard("fused_gelu_backward", fused);
    gelu(x).backward(ones({4099}));
    grads[fused] = x.grad().to_vector<float>();
    x.zero_grad();
  }
  CHECK(grads[0] != grads[1]);
  CHECK(switches::get("fused_gelu_backward"));
  CHECK(switches::get("vector_math"));
}

TEST_CASE("fused_relu_backward: one pass and the mask-and-fill form give the same gradient, NaN and zeros included") {
  const double nan = std::nan("");
  // x: negative, -0, +0, positive, NaN (relu' is 0 where x <= 0; a NaN input passes the gradient,
  // as PyTorch's threshold_backward), and a run long enough for the vector loops and their tail.
  std::vector<double> xs = {-2.0, -0.0, 0.0, 3.0, nan};
  for (int i = 0; i < 70; ++i) xs.push_back((i % 7) - 3.0 + 0.25);
  const int64_t n = int64_t(xs.size());
  for (DType dt : {kF32, kF64, kF16, kBF16})
    for (bool fused : {false, true}) {
      CAPTURE(dt);
      CAPTURE(fused);
      SwitchGuard guard("fused_relu_backward", fused);
      // A strided input: every other element of a (2n) tensor.
      const Tensor column = from_vector<double>(xs, {n}).to(dt);
      const Tensor x = stack({column, column}, 1).select(1, 0);
      const Tensor xl = x.detach().requires_grad_(true);
      Generator gen(21);
      const Tensor g = randn({n}, {}, &gen).to(dt);
      relu(xl).backward(g);
      REQUIRE(xl.grad().defined());
      CHECK(xl.grad().dtype() == dt);
      const std::vector<double> gv = g.to(kF64).to_vector<double>(), got = xl.grad().to(kF64).to_vector<double>();
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += got[size_t(i)] != (xs[size_t(i)] <= 0.0 ? 0.0 : gv[size_t(i)]);
      CHECK(bad == 0);
    }
  Generator g2(22);
  const Tensor xs64 = (randn({5, 7}, kF64, &g2) + 0.05).requires_grad_(true);
  const auto r = autograd::gradcheck([](const std::vector<Tensor>& in) { return relu(in[0]); }, {xs64});
  CHECK_MESSAGE(r.ok, r.report);
  CHECK(switches::get("fused_relu_backward"));
}

TEST_CASE("fused_add_relu: add_relu equals relu(a + b) bit for bit, forward and backward, broadcast, NaN and zeros") {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  // Sums negative, -0 (-0.5 + 0.5 and -0 + -0), +0, positive, NaN, inf - inf, and a run long
  // enough for the vector loops and their tail.
  std::vector<double> as = {-2.0, -0.0, 0.0, 3.0, nan, inf, -0.5}, bs = {1.0, -0.0, 0.0, -1.0, 1.0, -inf, 0.5};
  for (int i = 0; i < 70; ++i) as.push_back((i % 7) - 3.0 + 0.25), bs.push_back((i % 5) - 2.0);
  const int64_t n = int64_t(as.size());
  for (DType dt : {kF32, kF64, kF16, kBF16}) {
    CAPTURE(dt);
    Generator gen(23);
    const Tensor a0 = from_vector<double>(as, {n}).to(dt), b0 = from_vector<double>(bs, {n}).to(dt);
    const Tensor g = randn({n}, {}, &gen).to(dt);
    const Tensor bias = randn({1, 5}, {}, &gen).to(dt), x2 = randn({3, 5}, {}, &gen).to(dt),
                 g2 = randn({3, 5}, {}, &gen).to(dt);
    std::vector<std::vector<double>> got[2];
    for (bool fused : {false, true}) {
      CAPTURE(fused);
      const Tensor a = a0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
      const Tensor y = fused ? add_relu(a, b) : relu(a + b);
      y.backward(g);
      // A broadcast bias: its gradient is summed over the rows.
      const Tensor x = x2.detach().requires_grad_(true), c = bias.detach().requires_grad_(true);
      const Tensor z = fused ? add_relu(x, c) : relu(x + c);
      z.backward(g2);
      got[fused] = {values(y), values(a.grad()), values(b.grad()), values(z), values(x.grad()), values(c.grad())};
    }
    for (size_t k = 0; k < got[0].size(); ++k) {
      CAPTURE(k);
      REQUIRE(got[0][k].size() == got[1][k].size());
      int bad = 0;
      for (size_t i = 0; i < got[0][k].size(); ++i) {
        const double u = got[0][k][i], v = got[1][k][i];
        bad += !(u == v && std::signbit(u) == std::signbit(v)) && !(std::isnan(u) && std::isnan(v));
      }
      CHECK(bad == 0);
    }
  }
  Generator g3(24);
  const Tensor a64 = (randn({4, 6}, kF64, &g3) + 0.05).requires_grad_(true),
               b64 = randn({6}, kF64, &g3).requires_grad_(true);
  const auto r = autograd::gradcheck([](const std::vector<Tensor>& in) { return add_relu(in[0], in[1]); }, {a64, b64});
  CHECK_MESSAGE(r.ok, r.report);
}

// With batch norm's own fold off, so that the blocks' ends reach add_relu.
TEST_CASE("fused_add_relu: ResNet-18 with its blocks' add_relu trains as with add then relu, bit for bit") {
  std::vector<std::vector<double>> got[2];
  SwitchGuard bn_fold("fused_bn_add_relu", false);
  for (bool fused : {false, true}) {
    SwitchGuard guard("fused_add_relu", fused);
    manual_seed(3);
    auto m = nn::models::resnet18(10, 3);
    Generator gen(4);
    const Tensor x = randn({2, 3, 8, 8}, {}, &gen);
    const Tensor y = (*m)(x);
    sum(square(y)).backward();
    got[fused].push_back(values(y));
    for (const auto& [name, p] : m->named_parameters()) got[fused].push_back(values(p.grad()));
  }
  REQUIRE(got[0].size() == got[1].size());
  for (size_t k = 0; k < got[0].size(); ++k) CHECK(got[0][k] == got[1][k]);
  CHECK(switches::get("fused_add_relu"));
}
