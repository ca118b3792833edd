// The register-tiled FlashAttention (cuda/flash_forward_mma.cuh, cuda/flash_backward_mma.cuh, the
// flash_attention_mma switch) on CUDA against attention in f64 on the CPU from the same rounded inputs: lengths 1, 63,
// 64, 65 and 257 (both sides of the 64-wide tiles, past one tile of keys), L != S, head dims 32
// (zero-padded to 64), 64 and 128, without a mask, causal, with a mask that hides a pattern of keys and
// every key of one row, and both; f16 and bf16; the three gradients from the register-tiled
// backward (cuda/flash_backward_mma.cuh), which reads this forward's logsumexp. Two runs must agree
// bit for bit. Skipped without a GPU.
#include <doctest/doctest.h>

#include <cmath>
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

// Sets flash_attention_mma for a scope, with flash_attention on; restores both after.
struct MmaForward {
  toggles::Scoped flash{toggles::Toggle::flash_attention, true};
  toggles::Scoped mma;
  explicit MmaForward(bool on) : mma(toggles::Toggle::flash_attention_mma, on) {}
};

}  // namespace

TEST_CASE(
    "cuda: register-tiled flash attention matches f64 attention across tile edges, head dims and masks, with gradients" *
    MDL_CUDA_ONLY) {
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1}, {63, 63}, {64, 64}, {65, 65}, {257, 257}, {65, 130}};
  uint64_t seed = 100;
  for (DType t : {kF16, kBF16})
    for (int64_t E : {32, 64, 128})
      for (auto [L, S] : lengths)
        for (int masking = 0; masking < 4; ++masking) {
          const bool causal = masking & 1;
          const Tensor mask = masking & 2 ? patterned_mask(L, S, L / 2) : Tensor();
          const Tensor q = sample({1, 2, L, E}, t, seed++), k = sample({1, 2, S, E}, t, seed++),
                       v = sample({1, 2, S, E}, t, seed++), w = sample({1, 2, L, E}, t, seed++);
          auto run = [&](Device d, DType as) {
            Tensor a = q.to(as).to(d).detach().requires_grad_(), b = k.to(as).to(d).detach().requires_grad_(),
                   c = v.to(as).to(d).detach().requires_grad_();
            Tensor y = F::scaled_dot_product_attention(a, b, c, mask.defined() ? mask.to(d) : Tensor(), causal);
            sum(y * w.to(as).to(d)).backward();
            return std::vector<Tensor>{y.detach(), a.grad(), b.grad(), c.grad()};
          };
          const auto want = run(Device::cpu(), kF64);
          MmaForward on(true);
          const auto got = run(kGpu, t), again = run(kGpu, t);
          const char* names[] = {"out", "dq", "dk", "dv"};
          const double tol = t == kF16 ? 1e-2 : 6e-2;
          for (size_t i = 0; i < want.size(); ++i) {
            const double err = rel_err(got[i], want[i]);
            CHECK_MESSAGE(err <= tol, dtype_name(t), " E=", E, " L=", L, " S=", S, " causal=", causal,
                          " mask=", bool(masking & 2), " ", names[i], ": relative error ", err);
            CHECK_MESSAGE(bitwise_equal(got[i], again[i]), dtype_name(t), " E=", E, " L=", L, " S=", S, " ", names[i],
                          ": two runs differ");
          }
        }
}

TEST_CASE("cuda: register-tiled and WMMA flash attention agree, and a row that sees no key gives zeros" *
          MDL_CUDA_ONLY) {
  // Past one wave of blocks (32 x 6 heads x 4 tiles), strided q (a transposed view), causal; output
  // and the three gradients.
  const Tensor q = sample({32, 256, 6, 64}, kF16, 1).to(kGpu).transpose(1, 2),
               k = sample({32, 6, 256, 64}, kF16, 2).to(kGpu), v = sample({32, 6, 256, 64}, kF16, 3).to(kGpu),
               w = sample({32, 6, 256, 64}, kF16, 4).to(kGpu);
  auto run = [&](bool mma) {
    MmaForward use(mma);
    CHECK(toggles::flash_attention_mma() == mma);
    Tensor a = q.detach().requires_grad_(), b = k.detach().requires_grad_(), c = v.detach().requires_grad_();
    Tensor y = F::scaled_dot_product_attention(a, b, c, Tensor(), true);
    sum(y * w).backward();
    return std::vector<Tensor>{y.detach(), a.grad(), b.grad(), c.grad()};
  };
  const auto wmma = run(false), mma = run(true);
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t i = 0; i < wmma.size(); ++i)
    CHECK_MESSAGE(rel_err(mma[i], wmma[i]) <= 1e-2, names[i], ": relative error ", rel_err(mma[i], wmma[i]));

  Tensor mask = ones({70, 70}, kBool);
  mask.slice(0, 3, 4).fill_(0.0);  // row 3 sees no key
  const Tensor a = sample({1, 2, 70, 64}, kBF16, 4).to(kGpu), b = sample({1, 2, 70, 64}, kBF16, 5).to(kGpu);
  MmaForward on(true);
  const Tensor y = F::scaled_dot_product_attention(a, b, b, mask.to(kGpu), false).to(Device::cpu()).to(kF32);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t e = 0; e < 64; ++e) {
        const float x = y.data_ptr<float>()[(h * 70 + i) * 64 + e];
        REQUIRE(std::isfinite(x));
        if (i == 3) REQUIRE(x == 0.0f);
      }
}

// A NaN in one query makes that row's scores NaN: every flash kernel (register-tiled and WMMA in f16
// and bf16, FMA and 3xTF32 in f32) returns that row as NaN, as the CPU does, and the other rows as
// numbers (a max that dropped the NaN gave zeros or a finite row).
TEST_CASE("cuda: flash attention returns a row whose scores hold a NaN as NaN, as the CPU does" * MDL_CUDA_ONLY) {
  struct Kernel {
    DType dtype;
    toggles::Toggle toggle;
    bool on;
  };
  const Kernel kernels[] = {{kF16, toggles::Toggle::flash_attention_mma, true},
                            {kBF16, toggles::Toggle::flash_attention_mma, true},
                            {kF16, toggles::Toggle::flash_attention_mma, false},
                            {kF32, toggles::Toggle::flash_attention_tf32x3, false},
                            {kF32, toggles::Toggle::flash_attention_tf32x3, true}};
  constexpr int64_t L = 70, S = 90, E = 64, kRow = 5;
  for (const Kernel& kn : kernels) {
    const DType dtype = kn.dtype;
    const char* toggle = toggles::name(kn.toggle);
    const bool on = kn.on;
    CAPTURE(dtype);
    CAPTURE(toggle);
    CAPTURE(on);
    Tensor q = sample({1, 2, L, E}, kF32, 41).contiguous();
    q.data_ptr<float>()[(L + kRow) * E + 3] = std::nanf("");  // head 1, row kRow
    const Tensor k = sample({1, 2, S, E}, kF32, 42), v = sample({1, 2, S, E}, kF32, 43);
    toggles::Scoped flash(toggles::Toggle::flash_attention, true), which(kn.toggle, kn.on);
    for (Device d : {Device::cpu(), kGpu}) {
      CAPTURE(d);
      const Tensor y = F::scaled_dot_product_attention(q.to(kn.dtype).to(d), k.to(kn.dtype).to(d), v.to(kn.dtype).to(d),
                                                       Tensor(), false)
                           .to(Device::cpu())
                           .to(kF32)
                           .contiguous();
      const float* p = y.data_ptr<float>();
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < L; ++i) {
          const bool nan_row = h == 1 && i == kRow;
          for (int64_t e = 0; e < E; ++e)
            REQUIRE_MESSAGE(std::isnan(p[(h * L + i) * E + e]) == nan_row, "head ", h, " row ", i, " col ", e);
        }
    }
  }
}
