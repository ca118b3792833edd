// f32 FlashAttention on tensor cores with 3xTF32 products (cuda/flash_forward_tf32.cuh,
// cuda/flash_backward_tf32.cuh, the flash_attention_tf32x3 switch) on CUDA against attention in f64
// on the CPU from the same f32 inputs: lengths 1, 63, 64, 65 and 257 (both sides of the 64-wide
// tiles, past one tile of keys), L != S, head dims 32 (zero-padded to 64), 64 and 128, without a mask,
// causal, with a mask that hides a pattern of keys and every key of one row, and both; the output,
// the logsumexp and the three gradients. Two runs must agree bit for bit, and the kernels must agree
// with the FMA kernels. Skipped without a GPU.
//
// The bound: a 3xTF32 product keeps about 22 bits of each operand (the dropped small * small term and
// the rounding of the small parts are each within 2^-22 of the product) and the sums are f32, so the
// kernels stay within a few 2^-22 ~ 2.4e-7 of the largest value, grown by the exp of the scores and
// the sums over up to 257 keys and 128 dims. Plain TF32 rounds each operand by up to 2^-11 ~ 4.9e-4.
// Attention at L = S = 257, D = 128 with these products emulated on the CPU (f32 sums rounded to
// nearest) errs by 0.5-2e-6 in 3xTF32 and by 3-9e-4 in TF32; 3e-5 lies between, with room for the
// tensor cores' own rounding of their f32 sums.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/api.h"
#include "kernels/attention.h"
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
constexpr double kTol = 3e-5;

// Sets flash_attention_tf32x3 for a scope, with flash_attention on; restores both after.
struct Tf32x3 {
  toggles::Scoped flash{toggles::Toggle::flash_attention, true};
  toggles::Scoped tf32x3;
  explicit Tf32x3(bool on) : tf32x3(toggles::Toggle::flash_attention_tf32x3, on) {}
};

// The forward's logsumexp (N, H, L) on device d in dtype `as`, through the kernel contract.
Tensor logsumexp_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, Device d,
                    DType as) {
  const int64_t N = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  const Tensor a = q.to(as).to(d), b = k.to(as).to(d), c = v.to(as).to(d);
  const Tensor out = empty({N, H, L, v.size(3)}, TensorOptions(as, d));
  const Tensor lse = empty({N, H, L}, TensorOptions(as == kF64 ? kF64 : kF32, d));
  const Tensor m = mask.defined() ? mask.to(d).expand({N, H, L, S}) : Tensor();
  kernels::attention_forward(d, out, lse, a, b, c, m, causal, 1.0 / std::sqrt(double(q.size(3))));
  return lse;
}

}  // namespace

TEST_CASE("cuda: 3xTF32 flash attention matches f64 attention across tile edges, head dims and masks, with gradients" *
          MDL_CUDA_ONLY) {
  const std::pair<int64_t, int64_t> lengths[] = {{1, 1}, {63, 63}, {64, 64}, {65, 65}, {257, 257}, {65, 130}};
  uint64_t seed = 300;
  for (int64_t E : {32, 64, 128})
    for (auto [L, S] : lengths)
      for (int masking = 0; masking < 4; ++masking) {
        const bool causal = masking & 1;
        const Tensor mask = masking & 2 ? patterned_mask(L, S, L / 2) : Tensor();
        const Tensor q = sample({1, 2, L, E}, kF32, seed++), k = sample({1, 2, S, E}, kF32, seed++),
                     v = sample({1, 2, S, E}, kF32, seed++), w = sample({1, 2, L, E}, kF32, seed++);
        auto run = [&](Device d, DType as) {
          Tensor a = q.to(as).to(d).detach().requires_grad_(), b = k.to(as).to(d).detach().requires_grad_(),
                 c = v.to(as).to(d).detach().requires_grad_();
          Tensor y = F::scaled_dot_product_attention(a, b, c, mask.defined() ? mask.to(d) : Tensor(), causal);
          sum(y * w.to(as).to(d)).backward();
          return std::vector<Tensor>{y.detach(), logsumexp_of(q, k, v, mask, causal, d, as), a.grad(), b.grad(),
                                     c.grad()};
        };
        const auto want = run(Device::cpu(), kF64);
        Tf32x3 on(true);
        const auto got = run(kGpu, kF32), again = run(kGpu, kF32);
        const char* names[] = {"out", "lse", "dq", "dk", "dv"};
        for (size_t i = 0; i < want.size(); ++i) {
          const double err = rel_err(got[i], want[i]);
          CHECK_MESSAGE(err <= kTol, "E=", E, " L=", L, " S=", S, " causal=", causal, " mask=", bool(masking & 2), " ",
                        names[i], ": relative error ", err);
          CHECK_MESSAGE(bitwise_equal(got[i], again[i]), "E=", E, " L=", L, " S=", S, " ", names[i],
                        ": two runs differ");
        }
      }
}

TEST_CASE("cuda: 3xTF32 and FMA flash attention agree, and a row that sees no key gives zeros" * MDL_CUDA_ONLY) {
  // Strided q (a transposed view), causal, head dim 64; head dim 128 with a mask, L != S; head dim 30,
  // whose 120-byte rows the tiles load by plain stores rather than 16-byte cp.async. Output and the
  // three gradients, against the FMA kernels.
  struct Case {
    Tensor q, k, v, w, mask;
    bool causal;
  };
  Tensor mask = ones({130, 200}, kBool);
  mask.slice(0, 3, 4).fill_(0.0);  // row 3 sees no key
  const Case cases[] = {
      {sample({4, 200, 3, 64}, kF32, 1).to(kGpu).transpose(1, 2), sample({4, 3, 200, 64}, kF32, 2).to(kGpu),
       sample({4, 3, 200, 64}, kF32, 3).to(kGpu), sample({4, 3, 200, 64}, kF32, 4).to(kGpu), Tensor(), true},
      {sample({2, 2, 130, 128}, kF32, 5).to(kGpu), sample({2, 2, 200, 128}, kF32, 6).to(kGpu),
       sample({2, 2, 200, 128}, kF32, 7).to(kGpu), sample({2, 2, 130, 128}, kF32, 8).to(kGpu), mask.to(kGpu), false},
      {sample({2, 2, 70, 30}, kF32, 9).to(kGpu), sample({2, 2, 90, 30}, kF32, 10).to(kGpu),
       sample({2, 2, 90, 30}, kF32, 11).to(kGpu), sample({2, 2, 70, 30}, kF32, 12).to(kGpu), Tensor(), true}};
  for (const Case& c : cases) {
    auto run = [&](bool tf32x3) {
      Tf32x3 use(tf32x3);
      CHECK(toggles::flash_attention_tf32x3() == tf32x3);
      Tensor a = c.q.detach().requires_grad_(), b = c.k.detach().requires_grad_(), d = c.v.detach().requires_grad_();
      Tensor y = F::scaled_dot_product_attention(a, b, d, c.mask, c.causal);
      sum(y * c.w).backward();
      return std::vector<Tensor>{y.detach(), a.grad(), b.grad(), d.grad()};
    };
    const auto fma = run(false), tc = run(true);
    const char* names[] = {"out", "dq", "dk", "dv"};
    for (size_t i = 0; i < fma.size(); ++i)
      CHECK_MESSAGE(rel_err(tc[i], fma[i]) <= kTol, "E=", c.q.size(3), " ", names[i], ": relative error ",
                    rel_err(tc[i], fma[i]));
    if (c.mask.defined()) {
      const Tensor y = tc[0].to(Device::cpu()).contiguous(), dq = tc[1].to(Device::cpu()).contiguous();
      for (int64_t bh = 0; bh < 4; ++bh)
        for (int64_t i = 0; i < 130; ++i)
          for (int64_t e = 0; e < 128; ++e) {
            const int64_t at = (bh * 130 + i) * 128 + e;
            REQUIRE(std::isfinite(y.data_ptr<float>()[at]));
            if (i == 3) REQUIRE((y.data_ptr<float>()[at] == 0.0f && dq.data_ptr<float>()[at] == 0.0f));
          }
      Tf32x3 on(true);
      const Tensor lse = logsumexp_of(c.q, c.k, c.v, c.mask, false, kGpu, kF32).to(Device::cpu());
      for (int64_t bh = 0; bh < 4; ++bh) CHECK(std::isinf(lse.data_ptr<float>()[bh * 130 + 3]));
    }
  }
}
