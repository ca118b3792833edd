// The fused linear layer y = act(x @ w^T + b): forward against the composed ops (matmul, add,
// relu/gelu) in every floating dtype, gradients by gradcheck in f64 and against the composed
// backward, every activation with and without bias, the error messages, the LinearAct module,
// autocast, and CUDA (cuBLASLt epilogues) against the CPU, skipped without a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "ops/autocast.h"
#include "ops/gradcheck.h"
#include "autograd/node.h"
#include "mdl.h"
#include "nn/linear_act.h"
#include "cuda/api.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;

namespace {

constexpr Activation kActs[] = {Activation::None, Activation::Relu, Activation::GeluTanh};

Tensor composed(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  Tensor y = matmul(x, w.t());
  if (b.defined()) y = y + b;
  if (act == Activation::Relu) return relu(y);
  if (act == Activation::GeluTanh) return gelu(y, "tanh");
  return y;
}

std::string name(Activation act, bool bias, DType t) {
  return std::string(activation_name(act)) + (bias ? " with bias " : " without bias ") + dtype_name(t);
}

// Gradients of sum(y * r) for x, w and b, by the fused op or the composed ops.
std::vector<Tensor> grads(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0, Activation act,
                          const Tensor& r) {
  Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_();
  Tensor b = b0.defined() ? b0.detach().requires_grad_() : Tensor();
  Tensor y = fused ? nn::functional::linear(x, w, b, act) : composed(x, w, b, act);
  sum(y * r).backward();
  return {x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

}  // namespace

TEST_CASE("linear_act: forward matches matmul + bias + activation in every floating dtype") {
  for (DType t : {kF64, kF32, kF16, kBF16})
    for (Activation act : kActs)
      for (bool bias : {true, false}) {
        Tensor x = sample({2, 5, 19}, t, 1), w = sample({23, 19}, t, 2), b = bias ? sample({23}, t, 3) : Tensor();
        Tensor got = nn::functional::linear(x, w, b, act);
        CHECK(got.dtype() == t);
        Tensor want = composed(x.to(kF64), w.to(kF64), b.defined() ? b.to(kF64) : b, act);  // exact reference
        check_close(got.to(kF64), want,
                    same_tol(t == kF64   ? 1e-12
                             : t == kF32 ? 1e-5
                                         : dtype_tol(t).rtol * 4),
                    name(act, bias, t));
      }
}

TEST_CASE("linear_act: relu and gelu really act (negative pre-activations change)") {
  Tensor x = sample({8, 4}, kF32, 4), w = sample({6, 4}, kF32, 5), b = sample({6}, kF32, 6);
  Tensor lin = nn::functional::linear(x, w, b, Activation::None);
  Tensor r = nn::functional::linear(x, w, b, Activation::Relu);
  REQUIRE(min(lin).item<float>() < 0.0f);
  CHECK(min(r).item<float>() == 0.0f);
  check_close(lin, nn::functional::linear(x, w, b), dtype_tol(kF32), "none equals plain linear");
}

// f64, every activation, with and without bias.
const test::GradcheckCases kLinearActGradcheckCases([](std::vector<test::GradcheckCase>& cases) {
  for (Activation act : kActs)
    for (bool bias : {true, false}) {
      Tensor x = sample({3, 2, 5}, kF64, 7).requires_grad_(), w = sample({4, 5}, kF64, 8).requires_grad_();
      Tensor b = sample({4}, kF64, 9).requires_grad_();
      std::vector<Tensor> inputs = bias ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w};
      cases.push_back({"linear_act", name(act, bias, kF64), inputs, [act, bias](const std::vector<Tensor>& in) {
                         return nn::functional::linear(in[0], in[1], bias ? in[2] : Tensor(), act);
                       }});
    }
});

TEST_CASE("linear_act: gradients match the composed backward in f32 and f16") {
  for (DType t : {kF32, kF16})
    for (Activation act : kActs)
      for (bool bias : {true, false}) {
        Tensor x = sample({6, 17}, t, 10), w = sample({9, 17}, t, 11), b = bias ? sample({9}, t, 12) : Tensor();
        Tensor r = sample({6, 9}, t, 13);
        auto want = grads(false, x.to(kF64), w.to(kF64), b.defined() ? b.to(kF64) : b, act, r.to(kF64));
        auto got = grads(true, x, w, b, act, r);
        const Tol tol = same_tol(t == kF32 ? 1e-4 : 2e-2);
        const char* what[] = {"grad x", "grad w", "grad b"};
        for (int i = 0; i < (bias ? 3 : 2); ++i) {
          REQUIRE(got[size_t(i)].defined());
          CHECK(got[size_t(i)].dtype() == t);
          check_close(got[size_t(i)].to(kF64), want[size_t(i)], tol, name(act, bias, t) + " " + what[i]);
        }
      }
}

TEST_CASE("linear_act: gradients over several pieces of rows and blocks of columns match the composed backward") {
  // 263 rows: pieces of 64 and a short one, groups of 4 rows and a tail; 300 columns: blocks of 256 and a short one
  for (DType t : {kF32, kF16})
    for (Activation act : kActs) {
      Tensor x = sample({263, 5}, t, 40), w = sample({300, 5}, t, 41), b = sample({300}, t, 42);
      Tensor r = sample({263, 300}, t, 43);
      auto want = grads(false, x.to(kF64), w.to(kF64), b.to(kF64), act, r.to(kF64));
      auto got = grads(true, x, w, b, act, r);
      const char* what[] = {"grad x", "grad w", "grad b"};
      for (int i = 0; i < 3; ++i)
        check_close(got[size_t(i)].to(kF64), want[size_t(i)], same_tol(t == kF32 ? 1e-4 : 2e-2),
                    name(act, true, t) + " " + what[i]);
    }
}

TEST_CASE("linear_act: forward and gradients are bitwise the same on 1 and 2 threads") {
  // Big enough that both epilogue passes split their rows / columns over the threads.
  Tensor x = sample({512, 48}, kF32, 35), w = sample({256, 48}, kF32, 36), b = sample({256}, kF32, 37);
  Tensor r = sample({512, 256}, kF32, 38);
  const int threads = get_num_threads();
  std::vector<std::vector<float>> runs[2];
  for (int t : {1, 2}) {
    set_num_threads(t);
    auto g = grads(true, x, w, b, Activation::GeluTanh, r);
    runs[t - 1] = {nn::functional::linear(x, w, b, Activation::GeluTanh).to_vector<float>(), g[0].to_vector<float>(),
                   g[1].to_vector<float>(), g[2].to_vector<float>()};
  }
  set_num_threads(threads);
  for (size_t i = 0; i < 4; ++i)
    CHECK_MESSAGE(runs[0][i] == runs[1][i], "output ", i, " differs between 1 and 2 threads");
}

TEST_CASE("linear_act: only the inputs that need a gradient get one; empty batches work") {
  Tensor x = sample({4, 3}, kF32, 14), w = sample({2, 3}, kF32, 15).requires_grad_(), b = sample({2}, kF32, 16);
  sum(nn::functional::linear(x, w, b, Activation::Relu)).backward();
  CHECK(w.grad().defined());
  CHECK_FALSE(x.grad().defined());
  Tensor e = nn::functional::linear(zeros({0, 3}), w, b, Activation::GeluTanh);
  CHECK(e.shape() == Shape{0, 2});
  Tensor k0 = nn::functional::linear(zeros({2, 0}), zeros({3, 0}), full({3}, -1.0), Activation::Relu);
  check_close(k0, zeros({2, 3}), dtype_tol(kF32), "in_features 0: relu(bias)");
}

namespace {

// ReLU's backward on `device` with an infinite incoming gradient, the bias's gradient asked for
// (the activation gradient and the column sums in one pass) or not (the activation gradient alone).
void check_relu_backward_of_inf(Device device, bool bias_grad) {
  CAPTURE(bias_grad);
  // pre = x @ w^T + b = (x0 - x1, x0 + x1) per row: negative, zero and positive entries.
  Tensor x = from_vector<float>({1, 2, 3, -3, -1, 0}, {3, 2}).to(device).requires_grad_();
  Tensor w = from_vector<float>({1, -1, 1, 1}, {2, 2}).to(device), b = zeros({2}).to(device);
  if (bias_grad) b.requires_grad_();
  Tensor y = nn::functional::linear(x, w, b, Activation::Relu);
  const float inf = std::numeric_limits<float>::infinity();
  y.backward(full({3, 2}, inf).to(device));
  // Row 0: pre (-1, 3) -> dpre (0, inf); row 1: (6, 0) -> (inf, 0); row 2: (-1, -1) -> (0, 0).
  // dx = dpre @ w: row 0 (inf, inf), row 1 (inf, -inf), row 2 (0, 0): no NaN from inf * 0.
  CHECK(x.grad().cpu().to_vector<float>() == std::vector<float>{inf, inf, inf, -inf, 0, 0});
  if (bias_grad) CHECK(b.grad().cpu().to_vector<float>() == std::vector<float>{inf, inf});
}

}  // namespace

TEST_CASE("linear_act: ReLU's backward passes the gradient where pre > 0 and zero elsewhere, even an infinite one") {
  for (bool bias_grad : {false, true}) check_relu_backward_of_inf(Device::cpu(), bias_grad);
}

TEST_CASE("cuda: linear_act's ReLU backward gives no NaN from an infinite gradient where pre <= 0" * MDL_CUDA_ONLY) {
  for (bool bias_grad : {false, true}) check_relu_backward_of_inf(Device::cuda(), bias_grad);
}

TEST_CASE("linear_act: bad shapes, dtypes and devices throw naming them") {
  Tensor x = zeros({4, 3}), w = zeros({5, 3}), b = zeros({5});
  CHECK_THROWS_WITH_AS(nn::functional::linear(zeros({4, 7}), w, b, Activation::Relu),
                       doctest::Contains("input [4,7] has 7 features but weight [5,3] expects 3"), Error);
  CHECK_THROWS_WITH_AS(nn::functional::linear(x, zeros({5, 3, 1}), b, Activation::GeluTanh),
                       doctest::Contains("2-D weight (out, in), got shape [5,3,1]"), Error);
  CHECK_THROWS_WITH_AS(nn::functional::linear(x, w, zeros({4}), Activation::None),
                       doctest::Contains("bias of shape [4] should be [5]"), Error);
  CHECK_THROWS_WITH_AS(nn::functional::linear(x, w.to(kF64), b, Activation::Relu),
                       doctest::Contains("weight [5,3] is f64 but the input [4,3] is f32"), Error);
  CHECK_THROWS_WITH_AS(nn::functional::linear(zeros({4, 3}, kI64), zeros({5, 3}, kI64), Tensor(), Activation::Relu),
                       doctest::Contains("expected a floating input"), Error);
  CHECK_THROWS_WITH_AS(nn::functional::linear(x, w, b, Activation(7)), doctest::Contains("unknown activation 7"),
                       Error);
}

TEST_CASE("linear_act: LinearAct names its parameters as Linear and runs the fused op") {
  manual_seed(3);
  auto layer = std::make_shared<nn::LinearAct>(6, 4, Activation::GeluTanh);
  auto params = layer->named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[1].first == "bias");
  Tensor x = sample({3, 6}, kF32, 17);
  check_close(layer->forward(x), composed(x, layer->weight, layer->bias, Activation::GeluTanh), dtype_tol(kF32),
              "LinearAct forward");
  CHECK(layer->extra_repr().find("activation=gelu_tanh") != std::string::npos);
  CHECK_THROWS_WITH_AS(nn::LinearAct(0, 4, Activation::Relu), doctest::Contains("must be positive"), Error);
}

TEST_CASE("linear_act: TransformerEncoderLayer runs linear1 fused for relu and gelu_tanh") {
  for (const char* act : {"relu", "gelu_tanh"}) {
    manual_seed(4);
    nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = act});
    Tensor x = sample({2, 5, 8}, kF32, 34);
    Tensor h = (*layer.norm1)(x);
    Tensor y = x + layer.self_attn->forward(h, h, h);
    Tensor f = (*layer.linear1)((*layer.norm2)(y));
    f = std::string(act) == "relu" ? relu(f) : gelu(f, "tanh");
    check_close(layer.forward(x), y + (*layer.linear2)(f), dtype_tol(kF32), std::string("encoder layer ") + act);
  }
  CHECK_THROWS_WITH_AS(nn::TransformerEncoderLayer(8, 2, {.activation = "swish"}),
                       doctest::Contains("gelu, relu or gelu_tanh"), Error);
}

TEST_CASE("linear_act: autocast runs it in f16 and the f32 parameters get f32 gradients") {
  Tensor x = sample({5, 8}, kF32, 18), w = sample({3, 8}, kF32, 19).requires_grad_(),
         b = sample({3}, kF32, 20).requires_grad_();
  Tensor y;
  {
    amp::AutocastGuard autocast(kF16);
    y = nn::functional::linear(x, w, b, Activation::Relu);
  }
  CHECK(y.dtype() == kF16);
  sum(y.to(kF32)).backward();
  CHECK(w.grad().dtype() == kF32);
  CHECK(b.grad().dtype() == kF32);
}

TEST_CASE("cuda: linear_act (cuBLASLt epilogues) matches the CPU, forward and backward" * MDL_CUDA_ONLY) {
  const Device gpu = Device::cuda();
  // 66 rows of 24 columns, and 4100 rows of 200 (the bias sums over many row pieces, columns past
  // a multiple of 32); the gradients the same bits on a second run.
  const std::pair<Shape, int64_t> shapes[] = {{{2, 33, 40}, 24}, {{4100, 40}, 200}};
  for (const auto& [xs, out] : shapes)
    for (DType t : {kF32, kF16, kBF16, kF64})
      for (Activation act : kActs)
        for (bool bias : {true, false}) {
          Shape rs = xs;
          rs.back() = out;
          Tensor x = sample(xs, t, 21), w = sample({out, 40}, t, 22), b = bias ? sample({out}, t, 23) : Tensor();
          Tensor r = sample(rs, t, 24);
          const Tol tol = same_tol(t == kF64 ? 1e-10 : t == kF32 ? 1e-4 : t == kF16 ? 1e-2 : 5e-2);
          check_close(nn::functional::linear(x.to(gpu), w.to(gpu), b.defined() ? b.to(gpu) : b, act).cpu(),
                      nn::functional::linear(x, w, b, act), tol, name(act, bias, t) + " forward");
          auto want = grads(true, x, w, b, act, r);
          auto got = grads(true, x.to(gpu), w.to(gpu), b.defined() ? b.to(gpu) : b, act, r.to(gpu));
          auto again = grads(true, x.to(gpu), w.to(gpu), b.defined() ? b.to(gpu) : b, act, r.to(gpu));
          for (int i = 0; i < (bias ? 3 : 2); ++i) {
            check_close(got[size_t(i)].cpu(), want[size_t(i)], tol, name(act, bias, t) + " grad " + std::to_string(i));
            check_close(again[size_t(i)], got[size_t(i)], kExact,
                        name(act, bias, t) + " grad " + std::to_string(i) + " second run");
          }
        }
}

TEST_CASE("cuda: linear_act takes operands at any alignment, TF32 on, and repeated shapes" * MDL_CUDA_ONLY) {
  const Device gpu = Device::cuda();
  for (DType t : {kF16, kF32}) {
    // Row 1 of a (9, 16) buffer: the data starts 16 elements in (32 or 64 bytes), not 256-aligned;
    // an odd shape (K = 15) leaves rows unaligned as well.
    Tensor xb = sample({9, 15}, t, 25), w = sample({7, 15}, t, 26), b = sample({7}, t, 27);
    Tensor xd = xb.to(gpu).slice(0, 1, 9);
    for (int rep = 0; rep < 2; ++rep)
      check_close(nn::functional::linear(xd, w.to(gpu), b.to(gpu), Activation::GeluTanh).cpu(),
                  nn::functional::linear(xb.slice(0, 1, 9), w, b, Activation::GeluTanh),
                  same_tol(t == kF16 ? 1e-2 : 1e-4), name(Activation::GeluTanh, true, t) + " offset");
  }
  // A bias 2 bytes off 16 (a slice of a packed bias, as attention's in_proj_bias gives) takes the
  // fallback rather than an epilogue that may load it 16 bytes at a time.
  for (Activation act : kActs) {
    Tensor x = sample({64, 64}, kF16, 34), w = sample({64, 64}, kF16, 35), bb = sample({65}, kF16, 36);
    check_close(nn::functional::linear(x.to(gpu), w.to(gpu), bb.to(gpu).slice(0, 1, 65), act).cpu(),
                nn::functional::linear(x, w, bb.slice(0, 1, 65), act), same_tol(1e-2),
                name(act, true, kF16) + " bias off 16 bytes");
  }
  // Aligned f16/bf16/f32 shapes take cuBLASLt's epilogue (not the fallback), every activation.
  const int64_t fallbacks = cuda::linear_act_fallbacks();
  for (DType t : {kF16, kBF16, kF32})
    for (Activation act : kActs) {
      Tensor x = sample({64, 64}, t, 31), w = sample({32, 64}, t, 32), b = sample({32}, t, 33);
      check_close(nn::functional::linear(x.to(gpu), w.to(gpu), b.to(gpu), act).cpu(),
                  nn::functional::linear(x, w, b, act),
                  same_tol(t == kF32   ? 1e-4
                           : t == kF16 ? 1e-2
                                       : 5e-2),
                  name(act, true, t) + " aligned");
    }
  CHECK(cuda::linear_act_fallbacks() == fallbacks);
  toggles::set_allow_tf32(true);
  Tensor x = sample({64, 64}, kF32, 28), w = sample({32, 64}, kF32, 29), b = sample({32}, kF32, 30);
  check_close(nn::functional::linear(x.to(gpu), w.to(gpu), b.to(gpu), Activation::Relu).cpu(),
              nn::functional::linear(x, w, b, Activation::Relu), {2e-2, 2e-2}, "tf32 relu");
  toggles::set_allow_tf32(false);
}
