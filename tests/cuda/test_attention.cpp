// Fused scaled-dot-product attention on CUDA against the CPU through nn::functional, forward and
// backward: causal and padding masks, rows that see no key, more keys and queries than one tile,
// L != S, broadcast batch dims and strided operands, in every floating dtype, with the plain
// fused kernel and (f32, f16, bf16) the FlashAttention-2 kernels; the flash kernels also against f64
// attention at lengths across their 64-wide tiles and head dims 64 to 128. Skipped (reported
// skipped) without a GPU; the too-large-head error is checked only where a GPU is present.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "cuda/api.h"
#include "mdl.h"
#include "nn/functional.h"
#include "kernels/attention.h"
#include "tests/support/attention_test_util.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();

// Attention on the CPU and the GPU from the same q, k, v (leaves) and mask; compares the output
// and the three gradients of sum(out * w).
void compare(const std::string& what, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
             bool causal) {
  auto run = [&](Device d) {
    Tensor a = q.to(d).detach().requires_grad_(), b = k.to(d).detach().requires_grad_(),
           c = v.to(d).detach().requires_grad_();
    Tensor y = F::scaled_dot_product_attention(a, b, c, mask.defined() ? mask.to(d) : Tensor(), causal);
    sum(y * sample(y.shape(), y.dtype(), 99).to(d)).backward();
    return std::vector<Tensor>{y.detach(), a.grad(), b.grad(), c.grad()};
  };
  const auto c = run(Device::cpu());
  const char* names[] = {"out", "dq", "dk", "dv"};
  {
    toggles::Scoped plain_kernel(toggles::Toggle::flash_attention, false);
    const auto g = run(kGpu);
    // Sums over keys in other orders.
    const Tol tol = q.dtype() == kF32 ? same_tol(1e-4) : q.dtype() == kF16 ? same_tol(5e-3) : dtype_tol(q.dtype());
    for (size_t i = 0; i < c.size(); ++i)
      check_close(g[i], c[i], tol, what + " " + names[i] + " " + dtype_name(q.dtype()));
  }
  if (q.dtype() != kF64) {
    toggles::Scoped flash(toggles::Toggle::flash_attention, true);
    const auto g = run(kGpu);
    // f16/bf16: P and dS are rounded to the input type before their products (the CPU keeps them
    // in f32). f32 stays f32 throughout: only the order of the sums differs.
    const double tol = q.dtype() == kF32 ? 1e-5 : q.dtype() == kF16 ? 1e-2 : 6e-2;
    for (size_t i = 0; i < c.size(); ++i) {
      const double err = rel_err(g[i], c[i]);
      CHECK_MESSAGE(err <= tol, what, " flash ", names[i], " ", dtype_name(q.dtype()), ": relative error ", err);
    }
  }
}

}  // namespace

TEST_CASE("cuda: fused attention matches the CPU, forward and backward, with causal and padding masks" *
          MDL_CUDA_ONLY) {
  for (DType t : {kF32, kF64, kF16, kBF16}) {
    Tensor q = sample({2, 3, 37, 16}, t, 1), k = sample({2, 3, 29, 16}, t, 2), v = sample({2, 3, 29, 24}, t, 3);
    compare("plain L != S", q, k, v, Tensor(), false);
    compare("causal L != S", q, k, v, Tensor(), true);
    // Padding mask (B, 1, 1, S): batch 1 hides its last 9 keys; every key of query row 4 hidden by a full mask.
    Tensor pad = ones({2, 1, 1, 29}, kBool);
    pad.slice(0, 1, 2).slice(3, 20, 29).fill_(0.0);
    compare("padding mask", q, k, v, pad, false);
    Tensor full = ones({37, 29}, kBool);
    full.slice(0, 4, 5).fill_(0.0);
    compare("a row that sees no key", q, k, v, full, true);
    // More than one tile of keys and queries (256 per tile).
    Tensor ql = sample({1, 2, 300, 8}, t, 4), kl = sample({1, 2, 300, 8}, t, 5), vl = sample({1, 2, 300, 8}, t, 6);
    compare("300 x 300 causal", ql, kl, vl, Tensor(), true);
    compare("300 x 300", ql, kl, vl, Tensor(), false);
    // Broadcast batch (k, v shared by every head) and strided q.
    Tensor qs = sample({2, 40, 3, 16}, t, 7).transpose(1, 2), kb = sample({2, 1, 33, 16}, t, 8),
           vb = sample({2, 1, 33, 16}, t, 9);
    compare("broadcast k, v and strided q", qs, kb, vb, Tensor(), false);
  }
}

TEST_CASE("cuda: fused attention names a head dim too large for its shared memory" * MDL_CUDA_ONLY) {
  Tensor q = zeros({1, 4, 8000}, kGpu), k = zeros({1, 4, 8000}, kGpu);
  CHECK_THROWS_WITH_AS(F::scaled_dot_product_attention(q, k, k), doctest::Contains("too large"), mdl::Error);
}

// Flash (f32, f16, bf16) against attention in f64 on the CPU from the same rounded inputs: lengths on
// both sides of the 64-wide tiles, L != S, head dims 64, 80 (zero-padded to 128) and 128, and
// 136 (past the flash kernels: the plain kernel takes it), without a mask, causal, with a mask
// that hides a pattern of keys and every key of row 1, and both. The tolerances hold f16/bf16
// rounding of the inputs' products, and f32's of its sums; a missed tile, mask or rescale is off
// by far more.
TEST_CASE("cuda: flash attention matches f64 attention across tile edges, head dims and masks, forward and backward" *
          MDL_CUDA_ONLY) {
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1}, {65, 129}, {129, 65}, {257, 257}, {1, 257}, {64, 64}};
  uint64_t seed = 10;
  for (DType t : {kF32, kF16, kBF16})
    for (int64_t E : {64, 80, 128, 136})
      for (auto [L, S] : lengths)
        for (int masking = 0; masking < 4; ++masking) {
          const bool causal = masking & 1;
          const Tensor mask = masking & 2 ? patterned_mask(L, S, 1) : Tensor();
          const Tensor q = sample({2, 2, L, E}, t, seed++), k = sample({2, 2, S, E}, t, seed++),
                       v = sample({2, 2, S, E}, t, seed++), w = sample({2, 2, L, E}, t, seed++);
          auto run = [&](Device d, DType as) {
            Tensor a = q.to(as).to(d).detach().requires_grad_(), b = k.to(as).to(d).detach().requires_grad_(),
                   c = v.to(as).to(d).detach().requires_grad_();
            Tensor y = F::scaled_dot_product_attention(a, b, c, mask.defined() ? mask.to(d) : Tensor(), causal);
            sum(y * w.to(as).to(d)).backward();
            return std::vector<Tensor>{y.detach(), a.grad(), b.grad(), c.grad()};
          };
          toggles::Scoped flash(toggles::Toggle::flash_attention, true);
          const auto want = run(Device::cpu(), kF64), got = run(kGpu, t);
          const char* names[] = {"out", "dq", "dk", "dv"};
          const double tol = t == kF32 ? 2e-5 : t == kF16 ? 1e-2 : 6e-2;
          for (size_t i = 0; i < want.size(); ++i) {
            const double err = rel_err(got[i], want[i]);
            CHECK_MESSAGE(err <= tol, dtype_name(t), " E=", E, " L=", L, " S=", S, " causal=", causal,
                          " mask=", bool(masking & 2), " ", names[i], ": relative error ", err);
          }
        }
}

TEST_CASE("cuda: the flash_attention switch reads back and the plain kernel agrees with flash" * MDL_CUDA_ONLY) {
  const Tensor q = sample({1, 3, 100, 64}, kF16, 1).to(kGpu), k = sample({1, 3, 90, 64}, kF16, 2).to(kGpu),
               v = sample({1, 3, 90, 64}, kF16, 3).to(kGpu);
  Tensor y_plain, y_flash;
  {
    toggles::Scoped off(toggles::Toggle::flash_attention, false);
    CHECK_FALSE(toggles::flash_attention());
    y_plain = F::scaled_dot_product_attention(q, k, v, Tensor(), true);
  }
  CHECK(toggles::flash_attention());
  y_flash = F::scaled_dot_product_attention(q, k, v, Tensor(), true);
  CHECK(rel_err(y_flash, y_plain) <= 1e-2);
}
