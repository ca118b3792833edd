// The direct convolution's row tile, for convs with several input and output channels per group
// (the plane tile, cpu/conv_direct_impl.h, takes the others): an implicit GEMM over a vector type V
// (AVX-512's 16 floats, AVX2's 8, or 16 bf16 pairs) and included by one file per ISA, each compiled for its ISA by
// pragma (so it calls nothing from the standard library, whose inline copies would get that ISA
// too). Lanes run over output channels: a tile is K pixels of one output row x NV vectors of
// output channels, K * NV accumulators that start at the bias. Each (c, ki, kj) step loads NV
// vectors of packed weights (one row, contiguous) and broadcasts K input values from the
// zero-padded sample, one FMA per accumulator; the K + kw - 1 values a kernel row reads are shared
// by its taps. No lane is masked, and no column matrix is ever built.
#pragma once
#include <cstdint>

#include "cpu/conv_direct.h"

namespace mdl::cpu::detail {

// V: using reg (the f32 accumulators); L (lanes); load(const float*) and set1(float) give a reg,
// store(float*, reg); load(const E*) and set1(E) give an operand; fma(w, x, acc) adds w * x to acc.
// For f32 (E = float) the operand is a reg and fma one FMA. For bf16 pairs (E = uint32_t, two
// input channels per element, cpu/bf16_pairs_avx512.cpp) the operand holds 16 pairs and fma is
// one VDPBF16PS: both channels' products per lane.
// out^T[(oh, ow0 + k)][co + j] for k < K, j < NV * L. K3: a 3x3 kernel.
template <class V, int K, int NV, bool K3, class E>
void conv_gemm_row_tile(const ConvGemmRowOf<E>& a, int64_t oh, int64_t ow0, int64_t co) {
  using reg = typename V::reg;
  using operand = decltype(V::load(a.wt));
  const int64_t kh = K3 ? 3 : a.kh, kw = K3 ? 3 : a.kw, kk = kh * kw;
  reg acc[K][NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const reg b = a.bias ? V::load(a.bias + co + v * V::L) : V::set1(0.0f);
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) acc[k][v] = b;
  }
  const E* x = a.xp + oh * a.wq + ow0;
  const E* w = a.wt + co;
  for (int64_t c = 0; c < a.cin; ++c, x += a.plane, w += kk * a.cop)
    for (int64_t ki = 0; ki < kh; ++ki) {
      const E* xr = x + ki * a.wq;
      const E* wr = w + ki * kw * a.cop;
#pragma GCC unroll 3
      for (int64_t kj = 0; kj < kw; ++kj) {
        operand wv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) wv[v] = V::load(wr + kj * a.cop + v * V::L);
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const operand xv = V::set1(xr[k + kj]);
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) acc[k][v] = V::fma(wv[v], xv, acc[k][v]);
        }
      }
    }
  float* o = a.out + (oh * a.wo + ow0) * a.cop + co;
#pragma GCC unroll 8
  for (int k = 0; k < K; ++k)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) V::store(o + k * a.cop + v * V::L, acc[k][v]);
}

template <class V, int NV, class E>
void conv_gemm_row_k(const ConvGemmRowOf<E>& a, int64_t oh, int64_t ow0, int k, int64_t co) {
  static_assert(V::KMAX >= 1 && V::KMAX <= 8);
  const bool k3 = a.kh == 3 && a.kw == 3;
  switch (k) {
#define MDL_GEMM_ROW_CASE(n)                                             \
  case n:                                                                \
    if constexpr (V::KMAX >= n) {                                        \
      if (k3) return conv_gemm_row_tile<V, n, NV, true>(a, oh, ow0, co); \
      return conv_gemm_row_tile<V, n, NV, false>(a, oh, ow0, co);        \
    }                                                                    \
    break;
    MDL_GEMM_ROW_CASE(1)
    MDL_GEMM_ROW_CASE(2)
    MDL_GEMM_ROW_CASE(3)
    MDL_GEMM_ROW_CASE(4)
    MDL_GEMM_ROW_CASE(5)
    MDL_GEMM_ROW_CASE(6)
    MDL_GEMM_ROW_CASE(7)
    MDL_GEMM_ROW_CASE(8)
#undef MDL_GEMM_ROW_CASE
  }
}

// k pixels (at most V::KMAX) from (oh, ow0), nv vectors (at most V::NVMAX) of output channels from co.
template <class V, class E>
void conv_gemm_row(const ConvGemmRowOf<E>& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv) {
  static_assert(V::NVMAX >= 1 && V::NVMAX <= 2);
  if constexpr (V::NVMAX >= 2)
    if (nv >= 2) return conv_gemm_row_k<V, 2>(a, oh, ow0, k, co);
  conv_gemm_row_k<V, 1>(a, oh, ow0, k, co);
}

}  // namespace mdl::cpu::detail
