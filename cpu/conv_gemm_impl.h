// The direct convolution's row tile, for convs with several input and output channels per group
// (the plane tile, cpu/conv_direct_impl.h, takes the others): an implicit GEMM over a vector type V
// (AVX-512's 16 floats or AVX2's 8) and included by one file per ISA, each compiled for its ISA by
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

// V: using reg; L (lanes); load(p), store(p, v), set1(f), fma(a, b, c) = a * b + c.
// out^T[(oh, ow0 + k)][co + j] for k < K, j < NV * L. K3: a 3x3 kernel.
template <class V, int K, int NV, bool K3>
void conv_gemm_row_tile(const ConvGemmRow& a, int64_t oh, int64_t ow0, int64_t co) {
  using reg = typename V::reg;
  const int64_t kh = K3 ? 3 : a.kh, kw = K3 ? 3 : a.kw, kk = kh * kw;
  reg acc[K][NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const reg b = a.bias ? V::load(a.bias + co + v * V::L) : V::set1(0.0f);
#pragma GCC unroll 8
    for (int k = 0; k < K; ++k) acc[k][v] = b;
  }
  const float* x = a.xp + oh * a.wq + ow0;
  const float* w = a.wt + co;
  for (int64_t c = 0; c < a.cin; ++c, x += a.plane, w += kk * a.cop)
    for (int64_t ki = 0; ki < kh; ++ki) {
      const float* xr = x + ki * a.wq;
      const float* wr = w + ki * kw * a.cop;
#pragma GCC unroll 3
      for (int64_t kj = 0; kj < kw; ++kj) {
        reg wv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) wv[v] = V::load(wr + kj * a.cop + v * V::L);
#pragma GCC unroll 8
        for (int k = 0; k < K; ++k) {
          const reg xv = V::set1(xr[k + kj]);
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

template <class V, int NV>
void conv_gemm_row_k(const ConvGemmRow& a, int64_t oh, int64_t ow0, int k, int64_t co) {
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
template <class V>
void conv_gemm_row(const ConvGemmRow& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv) {
  static_assert(V::NVMAX >= 1 && V::NVMAX <= 2);
  if constexpr (V::NVMAX >= 2)
    if (nv >= 2) return conv_gemm_row_k<V, 2>(a, oh, ow0, k, co);
  conv_gemm_row_k<V, 1>(a, oh, ow0, k, co);
}

}  // namespace mdl::cpu::detail
