// amp_f32_grads: under autocast, linear (plain and with an activation) hands back its f32 input's,
// weight's and bias's gradients in f32 straight from the f32 sums. The parts: matmul of f16/bf16
// operands into an f32 result, and an f16/bf16 sum into f32, against f64 and against the rounded
// results; the layer's forward unchanged, its gradients f32 and at f32's accuracy where the switch
// off rounds them to 16 bits; no copies left in the backward of a layer on f32 inputs; and a model
// that still trains.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "ops/autocast.h"
#include "ops/native/native.h"
#include "switches/list/toggles.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

// max |got - want| / max |want|, both read as doubles.
double rel(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), w = values(want);
  REQUIRE(g.size() == w.size());
  double err = 0, mag = 0;
  for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::abs(g[i] - w[i])), mag = std::max(mag, std::abs(w[i]));
  return err / (mag > 0 ? mag : 1.0);
}

}  // namespace

TEST_CASE("matmul and sum of 16-bit operands into f32: the f32 sums, not their 16-bit roundings") {
  Generator g(5);
  for (DType t : {kF16, kBF16}) {
    CAPTURE(t);
    // Batched, with a transposed operand; K past one GEMM block.
    const Tensor a = randn({3, 37, 300}, TensorOptions(kF64), &g).to(t);
    const Tensor b = randn({3, 45, 300}, TensorOptions(kF64), &g).to(t).transpose(1, 2);
    const Tensor exact = native::matmul(a.to(kF64), b.to(kF64));
    const Tensor wide = native::matmul(a, b, kF32), rounded = native::matmul(a, b);
    CHECK(wide.dtype() == kF32);
    CHECK(wide.shape() == Shape({3, 37, 45}));
    CHECK(rel(wide, exact) < 1e-6);
    CHECK(rel(rounded, exact) > 1e-4);  // the 16-bit result is rounded: the f32 one is not that
    CHECK(max_rel_diff(rounded, wide.to(t)) == 0.0);

    const Tensor x = randn({500, 33}, TensorOptions(kF64), &g).to(t);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean}) {
      const Tensor s = native::reduce(op, x, {0}, false, kF32);
      CHECK(s.dtype() == kF32);
      CHECK(rel(s, native::reduce(op, x.to(kF64), {0}, false)) < 1e-6);
    }
    // Other outs still convert: a max into f32, a sum into f64.
    CHECK(max_rel_diff(native::reduce(ReduceOp::Max, x, {0}, false, kF32),
                       native::reduce(ReduceOp::Max, x, {0}, false)) == 0.0);
    CHECK(native::reduce(ReduceOp::Sum, x, {0}, false, kF64).dtype() == kF64);
  }
  CHECK_THROWS_WITH_AS(native::matmul(ones({2, 2}), ones({2, 2}), kF16), doctest::Contains("only f16/bf16 -> f32"),
                       Error);
}

TEST_CASE("amp_f32_grads: linear's forward is unchanged, its gradients f32 at f32's accuracy, every activation") {
  for (DType t : {kF16, kBF16})
    for (int act = -1; act < 3; ++act) {  // -1: plain linear; else linear_act none / relu / gelu_tanh
      CAPTURE(t);
      CAPTURE(act);
      Generator g(9);
      const Tensor x0 = randn({64, 300}, TensorOptions(kF32), &g), w0 = randn({40, 300}, TensorOptions(kF32), &g),
                   b0 = randn({40}, TensorOptions(kF32), &g), gy = randn({64, 40}, TensorOptions(kF32), &g);
      auto run = [&](bool on) {
        toggles::Scoped f32_grads(toggles::Toggle::amp_f32_grads, on);
        Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
               b = b0.detach().requires_grad_(true);
        Tensor y;
        {
          amp::AutocastGuard autocast(t);
          y = act < 0 ? F::linear(x, w, b) : F::linear(x, w, b, Activation(act));
        }
        y.backward(gy.to(y.dtype()));
        return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
      };
      const auto off = run(false), on = run(true);
      check_close(on[0], off[0], kExact, "output");
      for (size_t i = 1; i < 4; ++i) CHECK(on[i].dtype() == kF32);
      // The gradients from the same 16-bit operands in f64: the f32 sums agree to f32's precision;
      // the switch off agrees only to 16 bits where the gradient passed through a 16-bit tensor.
      const Tensor x16 = x0.to(t).to(kF64), w16 = w0.to(t).to(kF64);
      Tensor gp = gy.to(t).to(kF64);
      if (act == int(Activation::Relu)) gp = gp * gt(on[0].to(kF64), scalar_tensor(0.0, kF64)).to(kF64);
      if (act == int(Activation::GeluTanh)) continue;  // its derivative is checked by linear_act's own tests
      gp = gp.to(t).to(kF64);                          // the 16-bit gradient both sides multiply
      const Tensor dx = matmul(gp, w16), dw = matmul(gp.transpose(0, 1), x16), db = sum(gp, {0});
      CHECK(rel(on[1], dx) < 1e-5);
      CHECK(rel(on[2], dw) < 1e-5);
      CHECK(rel(on[3], db) < 1e-5);
      CHECK(rel(off[2], dw) > 1e-4);  // the rounded weight gradient the switch saves
    }
}

TEST_CASE(
    "amp_f32_grads: a bf16 layer under f16 autocast gets its bf16 gradients through its casts, every activation") {
  // Neither f32 nor the autocast dtype: the gradients come back through the casts' own nodes, as
  // with the switch off (the f32 sums could not be handed back as bf16 by the fused kernels).
  for (int act = -1; act < 3; ++act) {  // -1: plain linear; else linear_act none / relu / gelu_tanh
    CAPTURE(act);
    Generator g(10);
    const Tensor x0 = randn({16, 24}, TensorOptions(kF32), &g).to(kBF16),
                 w0 = randn({8, 24}, TensorOptions(kF32), &g).to(kBF16),
                 b0 = randn({8}, TensorOptions(kF32), &g).to(kBF16);
    auto run = [&](bool on) {
      toggles::Scoped f32_grads(toggles::Toggle::amp_f32_grads, on);
      Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
             b = b0.detach().requires_grad_(true);
      Tensor y;
      {
        amp::AutocastGuard autocast(kF16);
        y = act < 0 ? F::linear(x, w, b) : F::linear(x, w, b, Activation(act));
      }
      y.backward(ones(y.shape(), TensorOptions(y.dtype())));
      return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
    };
    const auto off = run(false), on = run(true);
    for (size_t i = 0; i < 4; ++i) check_close(on[i], off[i], kExact, "output and gradients");
    for (size_t i = 1; i < 4; ++i) CHECK(on[i].dtype() == kBF16);
  }
}

TEST_CASE("amp_f32_grads: a linear layer on f32 inputs calls no copy in its backward, and a GPT still learns") {
  auto backward_copies = [](bool on) {
    toggles::Scoped f32_grads(toggles::Toggle::amp_f32_grads, on);
    manual_seed(1);
    auto layer = std::make_shared<nn::Linear>(32, 16);
    Tensor x = randn({8, 32}).requires_grad_(true);
    Tensor y;
    {
      amp::AutocastGuard autocast(kBF16);
      y = (*layer)(x);
    }
    profiler::Session prof({.memory = false, .record_modules = false});
    y.backward(ones(y.shape(), TensorOptions(y.dtype())));
    prof.stop();
    return std::count_if(prof.events().begin(), prof.events().end(), [](const profiler::Event& e) {
      return e.kind == profiler::EventKind::Kernel && std::string(e.name) == "copy";
    });
  };
  CHECK(backward_copies(false) == 3);  // x's, the weight's and the bias's gradients converted to f32
  CHECK(backward_copies(true) == 0);

  toggles::Scoped f32_grads(toggles::Toggle::amp_f32_grads, true);
  manual_seed(2);
  const nn::models::GPTOptions o{.context = 16, .n_layer = 1, .n_head = 2, .n_embd = 32};
  nn::models::GPT gpt(o);
  optim::AdamW opt(gpt.parameters(), {.lr = 3e-3});
  Generator g(3);
  const Tensor tokens = randint(0, o.vocab_size, {4, 16}, TensorOptions(kI64), &g);
  const Tensor target = randint(0, o.vocab_size, {4 * 16}, TensorOptions(kI64), &g);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kBF16);
      const Tensor logits = gpt(tokens);
      loss = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), target);
    }
    loss.backward();
    for (const Tensor& p : gpt.parameters()) REQUIRE((!p.grad().defined() || p.grad().dtype() == kF32));
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CAPTURE(first);
  CHECK(last < 0.5 * first);  // memorising one batch
}
