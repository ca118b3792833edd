// linear_bias_epilogue: nn::functional::linear with a bias runs the fused linear_act kernel without
// an activation. In f32 and f64 the output and the input and weight gradients keep their bits and the
// bias gradient is the same sum in another order; under autocast the
// 16-bit output is rounded once, and is at least as close to the exact result; a GPT step loses its
// bias adds and bias reductions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "ops/autocast.h"
#include "switches/list/toggles.h"
#include "tests/support/profiler_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

using V = std::vector<Tensor>;

// linear's output and the gradients of x, w and b for upstream gradient gy, the switch set to on.
V run(bool on, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& gy, bool permute_x = false) {
  toggles::Scoped epilogue(toggles::Toggle::linear_bias_epilogue, on);
  V leaves{x.detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()};
  const Tensor in = permute_x ? leaves[0].transpose(0, 1) : leaves[0];
  Tensor y = F::linear(in, leaves[1], leaves[2]);
  y.backward(gy);
  return {y.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

double max_abs_err(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), w = values(want);
  REQUIRE(g.size() == w.size());
  double e = 0;
  for (size_t i = 0; i < g.size(); ++i) e = std::max(e, std::abs(g[i] - w[i]));
  return e;
}

int64_t kernels_named(const profiler::Session& prof, const std::string& name) {
  return int64_t(profiler_test::find_all(prof, name, profiler::EventKind::Kernel).size());
}

}  // namespace

TEST_CASE("linear_bias_epilogue: f32 and f64 give the same output and input and weight gradients off and on") {
  Generator g(3);
  struct Shapes {
    const char* what;
    Shape x;
    int64_t out;
    bool permute_x;
  };
  // Past one GEMM block in every dimension; 3-D; a transposed input; no rows; no input features.
  const Shapes cases[] = {{"2-D, 300 x 270 -> 130", {300, 270}, 130, false},
                          {"3-D", {3, 17, 40}, 33, false},
                          {"transposed input", {40, 17}, 9, true},
                          {"no rows", {0, 8}, 5, false},
                          {"no input features", {6, 0}, 4, false}};
  for (DType t : {kF32, kF64})
    for (const Shapes& c : cases) {
      CAPTURE(t);
      CAPTURE(std::string(c.what));
      const Tensor x = randn(c.x, TensorOptions(t), &g);
      const int64_t in = c.permute_x ? c.x[0] : c.x.back();
      const Tensor w = randn({c.out, in}, TensorOptions(t), &g), b = randn({c.out}, TensorOptions(t), &g);
      Shape ys = c.x;
      if (c.permute_x) std::swap(ys[0], ys[1]);
      ys.back() = c.out;
      const Tensor gy = randn(ys, TensorOptions(t), &g);
      const V off = run(false, x, w, b, gy, c.permute_x), on = run(true, x, w, b, gy, c.permute_x);
      for (size_t i = 0; i < off.size(); ++i) {
        CAPTURE(i);
        CHECK(on[i].shape() == off[i].shape());
        if (i < 3) CHECK(values(on[i]) == values(off[i]));
        else CHECK(max_rel_diff(on[i], off[i]) <= (t == kF32 ? 2e-6 : 1e-14));  // one sum, in another order
      }
    }
}

TEST_CASE("linear_bias_epilogue: under autocast the 16-bit output is rounded once, at least as close to exact") {
  Generator g(4);
  for (DType t : {kF16, kBF16}) {
    CAPTURE(t);
    const Tensor x = randn({64, 96}, TensorOptions(kF32), &g), w = randn({48, 96}, TensorOptions(kF32), &g) * 0.1;
    const Tensor b = randn({48}, TensorOptions(kF32), &g) * 4.0;  // a bias that matters beside the product
    const Tensor exact = F::linear(x.to(t).to(kF64), w.to(t).to(kF64), b.to(t).to(kF64));
    auto output = [&](bool on) {
      toggles::Scoped epilogue(toggles::Toggle::linear_bias_epilogue, on);
      amp::AutocastGuard autocast(t);
      return F::linear(x, w, b);
    };
    const Tensor off = output(false), on = output(true);
    CHECK(on.dtype() == t);
    const double err_off = max_abs_err(off, exact), err_on = max_abs_err(on, exact);
    CAPTURE(err_off);
    CAPTURE(err_on);
    CHECK(err_on <= err_off);
    // Rounded once: within half a unit in the last place of the exact value, plus the f32 sum's error.
    const std::vector<double> got = values(on), want = values(exact);
    const double ulp_bits = t == kF16 ? 10 : 7;
    for (size_t i = 0; i < got.size(); ++i) {
      const double half_ulp = std::ldexp(1.0, int(std::floor(std::log2(std::abs(want[i]) + 1e-30)) - ulp_bits - 1));
      REQUIRE(std::abs(got[i] - want[i]) <= half_ulp * 1.01 + 1e-5 * std::abs(want[i]));
    }
  }
}

TEST_CASE("linear_bias_epilogue: a GPT step loses its bias adds, and its bias sums join the backward's one pass") {
  const nn::models::GPTOptions o{.context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
  manual_seed(5);
  nn::models::GPT gpt(o);
  const Tensor x = randint(0, o.vocab_size, {2, 16});
  struct Counts {
    int64_t binary, reduce, linear_act_backward;
  };
  auto counts = [&](bool on) {
    toggles::Scoped epilogue(toggles::Toggle::linear_bias_epilogue, on);
    profiler::Session prof({.memory = false, .record_modules = false});
    sum(gpt(x)).backward();
    prof.stop();
    gpt.zero_grad();
    return Counts{kernels_named(prof, "binary"), kernels_named(prof, "reduce"),
                  kernels_named(prof, "linear_act_backward")};
  };
  const Counts off = counts(false), on = counts(true);
  CAPTURE(off.binary);
  CAPTURE(off.reduce);
  // A layer's 4 biased linears (qkv, out projection, fc1, fc2); the head has no bias.
  CHECK(on.binary == off.binary - 4 * o.n_layer);
  CHECK(on.reduce == off.reduce - 4 * o.n_layer);
  CHECK(off.linear_act_backward == 0);
  CHECK(on.linear_act_backward == 4 * o.n_layer);
}
