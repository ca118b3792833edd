// packed_self_attention on CUDA, whose kernels read the heads from one (B, L, 3E) projection and write
// the output (B, L, E) and the projection's gradient (B, L, 3E) through strides: on every attention
// kernel (the plain one, flash on WMMA, flash on mma.sync, f32 flash on 3xTF32) and dtype, at lengths
// across the 64-wide tiles and head dims 32, 64 and 128, causal and with a padding mask that hides
// every key of one batch, the same bits as the same kernel on the split, transposed heads, and the
// CPU's results within each kernel's tolerance. Skipped without a GPU.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cuda/api.h"
#include "mdl.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "tests/support/attention_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();

// The output and qkv's gradient under gy, on qkv's device: packed, or through split heads.
std::vector<Tensor> run(bool packed, const Tensor& qkv0, int64_t H, const Tensor& mask, bool causal, const Tensor& gy) {
  Tensor qkv = qkv0.detach().requires_grad_(true);
  Tensor y;
  if (packed) {
    y = F::packed_self_attention(qkv, H, mask, causal);
  } else {
    const int64_t B = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, D = E / H;
    const std::vector<Tensor> p = split(qkv, E, -1);
    auto heads = [&](const Tensor& t) { return reshape(t, {B, L, H, D}).transpose(1, 2); };
    y = reshape(F::scaled_dot_product_attention(heads(p[0]), heads(p[1]), heads(p[2]), mask, causal).transpose(1, 2),
                {B, L, E});
  }
  y.backward(gy);
  return {y.detach(), qkv.grad()};
}

}  // namespace

TEST_CASE("cuda: packed self-attention writes heads in place on every kernel: the split heads' bits, the CPU's values" *
          MDL_CUDA_ONLY) {
  struct Kernel {
    const char* name;
    bool flash, mma, tf32x3;
  };
  const Kernel kernels[] = {{"plain", false, false, false},
                            {"flash wmma", true, false, false},
                            {"flash mma", true, true, false},
                            {"flash 3xtf32", true, false, true}};
  const int64_t B = 2, H = 2;
  for (const Kernel& kern : kernels)
    for (DType t : {kF64, kF32, kF16, kBF16})
      for (int64_t D : {32, 64, 128})
        for (int64_t L : {1, 65, 257})
          for (int masking = 0; masking < 2; ++masking) {
            if (kern.flash && t == kF64) continue;   // f64 always takes the plain kernel
            if (kern.mma && t == kF32) continue;     // the mma.sync kernels are f16/bf16 only
            if (kern.tf32x3 && t != kF32) continue;  // the 3xTF32 kernels are f32 only
            const std::string what = std::string(kern.name) + " " + dtype_name(t) + " D=" + std::to_string(D) +
                                     " L=" + std::to_string(L) + (masking ? " causal, padded" : "");
            CAPTURE(what);
            toggles::Scoped flash(toggles::Toggle::flash_attention, kern.flash);
            toggles::Scoped mma(toggles::Toggle::flash_attention_mma, kern.mma);
            toggles::Scoped tf32x3(toggles::Toggle::flash_attention_tf32x3, kern.tf32x3);
            Generator g(uint64_t(D * 1000 + L));
            const Tensor qkv = randn({B, L, 3 * H * D}, TensorOptions(kF64), &g).to(t);
            const Tensor gy = randn({B, L, H * D}, TensorOptions(kF64), &g).to(t);
            Tensor mask;
            if (masking) {  // batch 1 sees no key
              mask = ones({B, 1, 1, L}, TensorOptions(kBool));
              mask.select(0, 1).fill_(0.0);
            }
            const auto gpu = [&](bool packed) {
              return run(packed, qkv.to(kGpu), H, masking ? mask.to(kGpu) : Tensor(), masking, gy.to(kGpu));
            };
            const auto packed = gpu(true), split = gpu(false);
            CHECK_MESSAGE(bitwise_equal(packed[0], split[0]), what, ": output");
            CHECK_MESSAGE(bitwise_equal(packed[1], split[1]), what, ": qkv gradient");
            const auto cpu = run(true, qkv, H, mask, masking, gy);
            const double tol = t == kF64 ? 1e-12 : t == kF32 ? 1e-4 : t == kF16 ? 1e-2 : 6e-2;
            for (size_t i = 0; i < cpu.size(); ++i) {
              const double err = rel_err(packed[i], cpu[i]);
              CHECK_MESSAGE(err <= tol, what, i ? ": qkv gradient" : ": output", ", relative error ", err);
            }
          }
}
