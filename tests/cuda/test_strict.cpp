// CUDA cases that a fast but wrong kernel cannot pass: errors relative to each element at small
// magnitudes (softmax over 1,000 classes, mean-reduced gradients), an f16 product with K = 4096
// against f64 (f16 accumulation fails it), tensors past a million elements with odd tails and
// misaligned starts, gelu_backward's kernel called directly, and an autocast + GradScaler training
// step on the GPU against the same step on the CPU. Skipped (reported skipped) without a GPU.
#include <doctest/doctest.h>

#include <cmath>

#include "amp/grad_scaler.h"
#include "kernels/gelu.h"
#include "mdl.h"
#include "nn/functional.h"
#include "ops/autocast.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::check_close;
using mdl::test::Tol;

namespace {

const Device kGpu = Device::cuda();

Tensor normal(const Shape& s, DType t, uint64_t seed) {
  Generator g(seed);
  return randn(s, TensorOptions(kF64), &g).to(t);
}

// ||got - want|| / ||want|| over all elements, in f64.
double normwise_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = test::values(got), w = test::values(want);
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) num += (g[i] - w[i]) * (g[i] - w[i]), den += w[i] * w[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

// Past a million elements, not a multiple of any vector width or block size.
constexpr int64_t kLarge = 3 * (int64_t(1) << 20) + 7;

}  // namespace

TEST_CASE("cuda strict: softmax over 1,000 classes is right relative to each probability" * MDL_CUDA_ONLY) {
  // Probabilities of order 1e-3 down to 1e-7: an absolute tolerance of f32's 2e-5 would pass zeros.
  Tensor x = normal({64, 1000}, kF64, 11) * 3.0;
  Tensor want = softmax(x, 1);
  Tensor got = softmax(x.to(kF32).to(kGpu), 1);
  check_close(got, want, Tol{2e-5, 1e-30}, "softmax f32, per element");
  check_close(log_softmax(x.to(kF32).to(kGpu), 1), log_softmax(x, 1), Tol{2e-6, 2e-6}, "log_softmax f32");
}

TEST_CASE("cuda strict: mean-reduced cross-entropy gradients are right at their small magnitudes" * MDL_CUDA_ONLY) {
  // d loss / d logits = (softmax - onehot) / N: elements of order 1e-7 for N = 512, C = 1000.
  Tensor x = normal({512, 1000}, kF64, 12);
  Generator g(13);
  Tensor y = randint(0, 1000, {512}, TensorOptions(kI64), &g);
  Tensor xr = x.clone().requires_grad_();
  nn::functional::cross_entropy(xr, y).backward();
  Tensor xg = x.to(kF32).to(kGpu).requires_grad_();
  nn::functional::cross_entropy(xg, y.to(kGpu)).backward();
  check_close(xg.grad(), xr.grad(), Tol{1e-4, 1e-12}, "cross_entropy grad f32, per element");
}

TEST_CASE("cuda strict: an f16 product with K = 4096 accumulates in f32" * MDL_CUDA_ONLY) {
  // The f64 product of the same f16 values. With f32 accumulation the error is the output's
  // rounding to f16 (about 3e-4 normwise); accumulating in f16 over 4096 terms gives about 1e-2.
  for (DType t : {kF16, kBF16}) {
    Tensor a = normal({256, 4096}, t, 21), b = normal({4096, 192}, t, 22);
    Tensor want = matmul(a.to(kF64), b.to(kF64));
    Tensor got = matmul(a.to(kGpu), b.to(kGpu));
    const double err = normwise_error(got, want), rounding = t == kF16 ? 1e-3 : 8e-3;
    CHECK_MESSAGE(err < rounding, std::string(dtype_name(t)), " matmul K=4096: normwise error ", err, " (allowed ",
                  rounding, ")");
    Tensor got_t = matmul(b.t().to(kGpu), a.t().to(kGpu));  // transposed operands, another GEMM path
    CHECK_MESSAGE(normwise_error(got_t, want.t()) < rounding, std::string(dtype_name(t)), " transposed matmul K=4096");
  }
}

TEST_CASE("cuda strict: elementwise ops and reductions past a million elements, odd tails, misaligned starts" *
          MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF16, kBF16}) {
    Tensor a = normal({kLarge}, t, 31), b = normal({kLarge}, t, 32);
    Tensor ga = a.to(kGpu), gb = b.to(kGpu);
    check_close(ga + gb, a + b, test::dtype_tol(t), std::string("add ") + dtype_name(t));
    check_close(ga * gb, a * b, test::dtype_tol(t), std::string("mul ") + dtype_name(t));
    check_close(exp(ga), exp(a), test::dtype_tol(t), std::string("exp ") + dtype_name(t));
    // Views that start one element in: a vectorised kernel must not assume aligned pointers.
    Tensor va = a.slice(0, 1, kLarge), vb = b.slice(0, 1, kLarge);
    check_close(ga.slice(0, 1, kLarge) + gb.slice(0, 1, kLarge), va + vb, test::dtype_tol(t),
                std::string("add, offset views ") + dtype_name(t));
  }
  // The sum of 3M f32 values against f64: a tree reduction stays within ~1e-6 relative; a serial
  // f32 sum, or a block that drops its tail, does not.
  Tensor x = abs(normal({kLarge}, kF64, 33)) + 0.5;
  const double want = sum(x).item<double>();
  const double got = sum(x.to(kF32).to(kGpu)).item<double>();
  CHECK_MESSAGE(std::abs(got - want) <= 1e-5 * want, "sum of ", kLarge, " f32: ", got, " vs ", want);
  // Rows and columns past a block, odd. The sums of ~2000 terms of order one cancel to order one:
  // f32 rounding leaves ~1e-5 absolute; a dropped or doubled element leaves ~1.
  Tensor rows = normal({1031, 2053}, kF64, 34);
  check_close(sum(rows.to(kF32).to(kGpu), {1}), sum(rows, {1}), Tol{1e-5, 1e-4}, "row sums f32");
  check_close(sum(rows.to(kF32).to(kGpu), {0}), sum(rows, {0}), Tol{1e-5, 1e-4}, "column sums f32");
}

TEST_CASE("cuda strict: gelu_backward's kernel, called directly, matches the CPU's" * MDL_CUDA_ONLY) {
  for (bool tanh_approx : {false, true})
    for (DType t : {kF32, kF64, kF16, kBF16}) {
      Tensor x = normal({kLarge}, t, 41) * 3.0, go = normal({kLarge}, t, 42);
      Tensor want = empty({kLarge}, TensorOptions(t)), got = empty({kLarge}, TensorOptions(t, kGpu));
      kernels::gelu_backward(Device::cpu(), want, go, x, tanh_approx);
      kernels::gelu_backward(kGpu, got, go.to(kGpu), x.to(kGpu), tanh_approx);
      check_close(got, want, test::dtype_tol(t),
                  std::string("gelu_backward ") + (tanh_approx ? "tanh " : "erf ") + dtype_name(t));
    }
}

TEST_CASE("cuda strict: an autocast f16 + GradScaler training step on the GPU is as close to f32 as the CPU's" *
          MDL_CUDA_ONLY) {
  // The same model, batch and step on both devices, and in f32 on the CPU; each parameter's update
  // (after - before) is compared, so a wrong gradient cannot hide behind the unchanged bulk of the
  // weights. Under f16 the conv layers' updates lie about 5% normwise from f32's on the CPU, and the
  // GPU's from the CPU's as far: so the two AMP steps are not compared with each other, and the GPU's
  // must be no further from the f32 step than twice the CPU's distance.
  auto make = [] {
    manual_seed(5);
    return nn::models::SimpleCNN(1, 10, 28);
  };
  auto cpu_model = make(), gpu_model = make(), f32_model = make();
  gpu_model->to(kGpu);
  Tensor x = normal({32, 1, 28, 28}, kF32, 51);
  Generator g(52);
  Tensor y = randint(0, 10, {32}, TensorOptions(kI64), &g);
  auto step = [](nn::Module& model, const Tensor& x, const Tensor& y, bool amp) {
    optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
    amp::GradScaler scaler({.enabled = amp});
    std::vector<Tensor> before;
    for (const Tensor& p : model.parameters()) before.push_back(p.detach().clone().cpu());
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kF16, amp);
      loss = nn::functional::cross_entropy(model(x), y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    std::vector<Tensor> delta;
    const auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) delta.push_back(params[i].detach().cpu().to(kF64) - before[i].to(kF64));
    return std::pair{loss.item<double>(), delta};
  };
  const auto [f32_loss, f32_delta] = step(*f32_model, x, y, false);
  const auto [cpu_loss, cpu_delta] = step(*cpu_model, x, y, true);
  const auto [gpu_loss, gpu_delta] = step(*gpu_model, x.to(kGpu), y.to(kGpu), true);
  CHECK(cpu_loss == doctest::Approx(f32_loss).epsilon(5e-3));
  CHECK(gpu_loss == doctest::Approx(f32_loss).epsilon(5e-3));
  REQUIRE(cpu_delta.size() == f32_delta.size());
  REQUIRE(gpu_delta.size() == f32_delta.size());
  for (size_t i = 0; i < f32_delta.size(); ++i) {
    const double cpu_err = normwise_error(cpu_delta[i], f32_delta[i]),
                 gpu_err = normwise_error(gpu_delta[i], f32_delta[i]);
    CHECK_MESSAGE(cpu_err < 0.1, "parameter ", i, ": the CPU's AMP update differs from f32's by ", cpu_err);
    CHECK_MESSAGE(gpu_err < 2 * cpu_err + 5e-3, "parameter ", i, ": the GPU's AMP update differs from f32's by ",
                  gpu_err, " normwise, the CPU's by ", cpu_err);
  }
}

TEST_CASE("cuda strict: batch norm with channels split across blocks matches the CPU, forward and backward" *
          MDL_CUDA_ONLY) {
  // Channels of 65,472 and 140,000 values (many blocks each), 600 narrow channels (one block
  // each), and values centred at 1000 with spread 1 (a one-pass variance without a shift loses them).
  struct Case {
    Shape shape;
    double centre;
  };
  for (const Case& k : {Case{{64, 8, 33, 31}, 0.0}, Case{{2, 3, 70000}, 0.0}, Case{{4, 600, 3, 3}, 0.0},
                        Case{{16, 4, 40, 40}, 1000.0}}) {
    const int64_t C = k.shape[1];
    Tensor x = normal(k.shape, kF32, 61) + k.centre, w = normal({C}, kF32, 62), b = normal({C}, kF32, 63);
    Tensor gy = normal(k.shape, kF32, 64);
    auto run = [&](Device d) {
      auto leaf = [&](const Tensor& t) { return t.to(d).clone().requires_grad_(); };
      Tensor xl = leaf(x), wl = leaf(w), bl = leaf(b);
      Tensor rm = zeros({C}, d), rv = ones({C}, d);
      Tensor y = nn::functional::batch_norm(xl, rm, rv, wl, bl, true, 0.1, 1e-5);
      y.backward(gy.to(d));
      return std::vector<Tensor>{y, rm, rv, xl.grad(), wl.grad(), bl.grad()};
    };
    const std::vector<Tensor> want = run(Device::cpu()), got = run(kGpu);
    const char* names[] = {"y", "running_mean", "running_var", "grad x", "grad w", "grad b"};
    // Centred at 1000, f32 rounds x itself by 6e-5: outputs and x's gradient carry that.
    const double tol = k.centre > 0 ? 3e-4 : 5e-5;
    for (size_t i = 0; i < want.size(); ++i)
      check_close(got[i], want[i], test::same_tol(tol),
                  "batch_norm " + shape_str(k.shape) + " centre " + std::to_string(k.centre) + ": " + names[i]);
  }
}

TEST_CASE("cuda strict: embedding backward sums repeated rows in order, 16-bit gradients in f32" * MDL_CUDA_ONLY) {
  // A character GPT's batch: 8,192 lookups of 65 rows, half of them one row (a run of 4,096
  // entries); and a 50,000-row table hit sparsely. Against the f64 sum of the same gradients.
  struct Case {
    int64_t V, D, n;
  };
  for (const Case& k : {Case{65, 384, 8192}, Case{50000, 72, 3000}})
    for (DType t : {kF32, kF16, kBF16}) {
      Generator g(71);
      Tensor idx = randint(0, k.V, {k.n}, TensorOptions(kI64), &g);
      if (k.V == 65) idx.slice(0, 0, k.n / 2).fill_(7.0);
      Tensor gy = normal({k.n, k.D}, t, 72);
      Tensor w64 = zeros({k.V, k.D}, TensorOptions(kF64)).requires_grad_();
      nn::functional::embedding(idx, w64).backward(gy.to(kF64));
      Tensor want = w64.grad();
      Tensor w = zeros({k.V, k.D}, TensorOptions(t, kGpu)).requires_grad_();
      nn::functional::embedding(idx.to(kGpu), w).backward(gy.to(kGpu));
      const double err = normwise_error(w.grad(), want), allowed = t == kF32 ? 1e-6 : t == kF16 ? 1e-3 : 8e-3;
      CHECK_MESSAGE(err < allowed, "embedding backward V=", k.V, " ", std::string(dtype_name(t)), ": normwise error ",
                    err, " (allowed ", allowed, ")");
    }
}
