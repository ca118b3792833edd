// The direct conv tiles' vector type over bf16 pairs (cpu/conv_gemm_impl.h, cpu/conv_weight_grad_impl.h),
// for the two files that compile the pair loops (cpu/bf16_pairs_avx512bf16.cpp, cpu/bf16_pairs_avx512.cpp), after their target
// pragma: f32 accumulators of 16 lanes, operands of 16 pairs, and Dot::dot for the multiply-add.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "cpu/conv_direct.h"

namespace mdl::cpu::bf16_dot {

template <class Dot>
struct PairIsa {
  using reg = __m512;
  static constexpr int L = 16, NVMAX = detail::kConvRowVectorsAvx512, KMAX = detail::kConvRowPixelsAvx512;
  static_assert(detail::kWeightGradVectorsAvx512 == NVMAX, "both tiles hold the same vectors of output channels");
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512i load(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static __m512 set1(float f) { return _mm512_set1_ps(f); }
  static __m512i set1(uint32_t pair) { return _mm512_set1_epi32(int(pair)); }
  // acc + both products of each lane's pairs (w: 16 output channels' weights, x: one pixel's pair).
  static __m512 fma(__m512i w, __m512i x, __m512 acc) { return Dot::dot(acc, x, w); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
};

}  // namespace mdl::cpu::bf16_dot
