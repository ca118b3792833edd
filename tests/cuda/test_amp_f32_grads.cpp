// amp_f32_grads on CUDA: cuBLAS's f16/bf16 products into an f32 result and the f16/bf16 sum into
// f32, against the CPU's; linear and linear_act under autocast with f32 gradients from the GPU
// against the CPU's and against the switch off (rounded). Skipped without a GPU.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cuda/api.h"
#include "mdl.h"
#include "nn/functional.h"
#include "ops/autocast.h"
#include "ops/native/native.h"
#include "switches/list/toggles.h"
#include "tests/support/attention_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

TEST_CASE("cuda: 16-bit matmul and sum into f32, and linear's f32 gradients under autocast, match the CPU" *
          MDL_CUDA_ONLY) {
  const Device gpu = Device::cuda();
  toggles::Scoped exact(toggles::Toggle::allow_tf32, false);
  Generator g(4);
  for (DType t : {kF16, kBF16}) {
    CAPTURE(t);
    const Tensor a = randn({2, 67, 300}, TensorOptions(kF64), &g).to(t);
    const Tensor b = randn({2, 45, 300}, TensorOptions(kF64), &g).to(t).transpose(1, 2);
    const Tensor want = native::matmul(a.to(kF64), b.to(kF64));
    const Tensor got = native::matmul(a.to(gpu), b.to(gpu), kF32);
    CHECK(got.dtype() == kF32);
    CHECK(rel_err(got, want) < 1e-6);
    const Tensor x = randn({700, 33}, TensorOptions(kF64), &g).to(t);
    const Tensor s = native::reduce(ReduceOp::Sum, x.to(gpu), {0}, false, kF32);
    CHECK(s.dtype() == kF32);
    CHECK(rel_err(s, native::reduce(ReduceOp::Sum, x.to(kF64), {0}, false)) < 1e-6);

    for (int act = -1; act < 3; ++act) {
      CAPTURE(act);
      const Tensor x0 = randn({64, 300}, TensorOptions(kF32), &g), w0 = randn({40, 300}, TensorOptions(kF32), &g),
                   b0 = randn({40}, TensorOptions(kF32), &g), gy = randn({64, 40}, TensorOptions(kF32), &g);
      auto run = [&](Device d, bool on) {
        toggles::Scoped f32_grads(toggles::Toggle::amp_f32_grads, on);
        // Leaves of their own on each device: x0.to(cpu) is x0 itself, so without detach() the CPU
        // run would make x0 a leaf and the GPU's copies of it non-leaves with no .grad().
        Tensor xx = x0.to(d).detach().requires_grad_(true), w = w0.to(d).detach().requires_grad_(true),
               bb = b0.to(d).detach().requires_grad_(true);
        Tensor y;
        {
          amp::AutocastGuard autocast(t);
          y = act < 0 ? F::linear(xx, w, bb) : F::linear(xx, w, bb, Activation(act));
        }
        y.backward(gy.to(d).to(y.dtype()));
        return std::vector<Tensor>{xx.grad(), w.grad(), bb.grad()};
      };
      const auto cpu = run(Device::cpu(), true), on = run(gpu, true), off = run(gpu, false);
      const char* names[] = {"dx", "dw", "db"};
      for (size_t i = 0; i < 3; ++i) {
        CHECK(on[i].dtype() == kF32);
        const double err = rel_err(on[i], cpu[i]), rounded = rel_err(off[i], cpu[i]);
        CHECK_MESSAGE(err < 1e-4, names[i], ": relative error ", err);
        CHECK_MESSAGE(rounded < 2e-2, names[i], ": the switch off, relative error ", rounded);
      }
    }
  }
}
