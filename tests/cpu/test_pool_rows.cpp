// The 2x2 / stride 2 max pool's vector rows against its scalar loop, values and indices bit for
// bit: AVX-512's 16-wide rows with masked ends (called directly, and through max_pool2d_forward
// where the AVX-512 GEMM kernel runs) and the 4-float rows (forced by the AVX2 kernel), f32 and
// bf16, over row widths around 4, 8 and 16 outputs, odd input widths (the last column unread),
// values drawn from a small set (ties) with NaN and infinities among them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/pool_rows.h"
#include "mdl.h"
#include "kernels/pool.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {

// (2, 3, H, W) of values from {-inf, -1, 0, 1, 2, inf, NaN}, mostly the finite ones.
Tensor tied_values(int64_t H, int64_t W, DType dt, uint32_t seed) {
  const float pick[] = {-1,
                        0,
                        1,
                        2,
                        -1,
                        0,
                        1,
                        2,
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::infinity(),
                        std::nanf("")};
  std::vector<float> v(size_t(2 * 3 * H * W));
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = pick[(s >> 16) % 11];
  }
  return from_vector(v, {2, 3, H, W}).to(dt);
}

struct Pooled {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  std::vector<int64_t> idx;
  bool operator==(const Pooled& o) const {
    if (idx != o.idx || bf16 != o.bf16 || f32.size() != o.f32.size()) return false;
    for (size_t i = 0; i < f32.size(); ++i)
      if (!(f32[i] == o.f32[i] || (std::isnan(f32[i]) && std::isnan(o.f32[i])))) return false;
    return true;
  }
};

Pooled pool(const Tensor& x) {
  const int64_t Ho = x.size(2) / 2, Wo = x.size(3) / 2;
  Tensor out = make_tensor({2, 3, Ho, Wo}, x.dtype(), Device::cpu());
  Tensor idx = make_tensor({2, 3, Ho, Wo}, kI64, Device::cpu());
  kernels::max_pool2d_forward(Device::cpu(), out, idx, x, kernels::Pool2dParams{2, 2, 2, 2, 0, 0});
  Pooled p;
  p.idx = idx.to_vector<int64_t>();
  if (x.dtype() == kBF16) {
    const BFloat16* o = out.data_ptr<BFloat16>();
    for (int64_t i = 0; i < out.numel(); ++i) p.bf16.push_back(o[i].bits);
  } else {
    p.f32 = out.to_vector<float>();
  }
  return p;
}

}  // namespace

TEST_CASE("max pool rows: AVX-512 and 4-wide vectors give the scalar loop's winners and indices") {
  const bool avx512 = cpu::gemm_kernel_available(cpu::GemmKernel::avx512);
  const bool avx2 = cpu::gemm_kernel_available(cpu::GemmKernel::avx2);
  uint32_t seed = 1;
  for (DType dt : {kF32, kBF16})
    for (int64_t wo : {1, 3, 4, 5, 7, 8, 9, 14, 15, 16, 17, 23, 31, 32, 33, 40})
      for (int64_t W : {2 * wo, 2 * wo + 1})
        for (int64_t H : {2, 5}) {
          CAPTURE(dt);
          CAPTURE(W);
          CAPTURE(H);
          const Tensor x = tied_values(H, W, dt, seed++);
          Pooled scalar;
          {
            toggles::Scoped off(toggles::Toggle::max_pool_vectorized, false);
            scalar = pool(x);
          }
          if (avx512) {
            cpu::ScopedGemmKernel k(cpu::GemmKernel::avx512);
            CHECK(pool(x) == scalar);
          }
          if (avx2) {
            cpu::ScopedGemmKernel k(cpu::GemmKernel::avx2);
            CHECK(pool(x) == scalar);
          }
          if (!avx512) continue;
          // The AVX-512 row itself: plane 4's first output row, into buffers with a guard beyond.
          const int64_t plane = 4 * H * W;
          std::vector<int64_t> idx(size_t(wo + 1), -7);
          std::vector<int64_t> want(scalar.idx.begin() + 4 * (H / 2) * wo, scalar.idx.begin() + 4 * (H / 2) * wo + wo);
          if (dt == kF32) {
            const float* r0 = x.data_ptr<float>() + plane;
            std::vector<float> out(size_t(wo + 1), -7.0f);
            cpu::detail::max_pool_2x2_row_avx512(r0, r0 + W, 0, W, wo, out.data(), idx.data());
            for (int64_t j = 0; j < wo; ++j) {
              const float s = scalar.f32[size_t(4 * (H / 2) * wo + j)];
              CHECK((out[size_t(j)] == s || (std::isnan(out[size_t(j)]) && std::isnan(s))));
            }
            CHECK(out[size_t(wo)] == -7.0f);
          } else {
            const uint16_t* r0 = reinterpret_cast<const uint16_t*>(x.data_ptr<BFloat16>()) + plane;
            std::vector<uint16_t> out(size_t(wo + 1), 7);
            cpu::detail::max_pool_2x2_row_avx512(r0, r0 + W, 0, W, wo, out.data(), idx.data());
            CHECK(std::vector<uint16_t>(out.begin(), out.begin() + wo) ==
                  std::vector<uint16_t>(scalar.bf16.begin() + 4 * (H / 2) * wo,
                                        scalar.bf16.begin() + 4 * (H / 2) * wo + wo));
            CHECK(out[size_t(wo)] == 7);
          }
          CHECK(std::vector<int64_t>(idx.begin(), idx.begin() + wo) == want);
          CHECK(idx[size_t(wo)] == -7);
        }
}
