// The convolution weight gradient's register tile as an implicit GEMM, written once over a vector
// type V and included by one file per ISA (cpu/conv_direct_avx512.cpp, cpu/conv_direct_avx2.cpp),
// each compiled for its ISA by pragma.
//
// grad_w^T[c, t][co] = sum over samples n and output pixels p of x_padded[n, c, p + tap t] *
// grad_out^T[n, p][co]. Lanes run over output channels, so a tile of K taps x NV vectors of
// output channels lives in K * NV accumulators: each pixel loads NV vectors of grad_out^T (one
// row, contiguous) and broadcasts K input values, one FMA per accumulator. Nothing is summed across
// lanes, no lane is masked, and the sums over pixels run in one fixed order.
#pragma once
#include <cstdint>

#include "cpu/conv_direct.h"

namespace mdl::cpu::detail {

// V: using reg (f32 accumulators); L (lanes); load(const float*), store, add; load(const E*) and
// set1(E) give an operand, fma(g, x, acc) adds g * x to acc (cpu/conv_gemm_impl.h says more). For
// f32, E and X are float and an element is one pixel. For bf16 pairs, E is uint32_t, a pair of
// adjacent pixels (2e, 2e + 1) of a row of grad_out^T, and X uint16_t, the padded input in bf16,
// whose pixels 2e + tap and 2e + 1 + tap are read as one pair: one VDPBF16PS adds both pixels.
// The block's sums start from zero and are added to a.acc at the end (or stored there, the first
// block), so that no running sum is longer than one block of samples.
// Taps [t0, t0 + K) of the tile's input channel, output channels [co, co + NV * L) of the group.
// K3: the kernel is 3x3 and the tile holds all nine taps, their offsets known at compile time.
template <class V, int K, int NV, bool K3, class E, class X>
void weight_grad_gemm_tile(const WeightGradTileOf<E, X>& a, int64_t t0, int64_t co) {
  using reg = typename V::reg;
  using operand = decltype(V::load(a.gt));
  constexpr int64_t step = int64_t(sizeof(E) / sizeof(X));  // pixels per element
  // The operand at input pixel p: its value, or the pair (p, p + 1).
  const auto input_at = [](const X* p) {
    if constexpr (sizeof(X) == sizeof(E)) {
      return V::set1(*p);
    } else {
      E pair;
      __builtin_memcpy(&pair, p, sizeof pair);
      return V::set1(pair);
    }
  };
  int64_t off[K];
#pragma GCC unroll 9
  for (int k = 0; k < K; ++k) off[k] = K3 ? k / 3 * a.wp + k % 3 : (t0 + k) / a.kw * a.wp + (t0 + k) % a.kw;
  float* acc_rows = a.acc + t0 * a.cop + co;
  reg acc[K][NV];
#pragma GCC unroll 9
  for (int k = 0; k < K; ++k)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[k][v] = V::set1(0.0f);
  const int64_t hw = a.ho * a.wo;
  for (int64_t n = a.n0; n < a.n1; ++n) {
    const X* xs = a.xp + n * a.xp_sample;
    const E* gs = a.gt + n * hw * a.cop + co;
    for (int64_t oh = 0; oh < a.ho; ++oh) {
      const X* xr = xs + oh * a.wp;
      const E* gr = gs + oh * a.wo * a.cop;
      for (int64_t e = 0; e < a.wo; ++e, gr += a.cop) {
        operand g[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) g[v] = V::load(gr + v * V::L);
#pragma GCC unroll 9
        for (int k = 0; k < K; ++k) {
          const operand xv = input_at(xr + e * step + (K3 ? k / 3 * a.wp + k % 3 : off[k]));
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) acc[k][v] = V::fma(g[v], xv, acc[k][v]);
        }
      }
    }
  }
#pragma GCC unroll 9
  for (int k = 0; k < K; ++k)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      float* r = acc_rows + k * a.cop + v * V::L;
      V::store(r, a.store ? acc[k][v] : V::add(V::load(r), acc[k][v]));
    }
}

template <class V, int NV, class E, class X>
void weight_grad_gemm_taps(const WeightGradTileOf<E, X>& a, int64_t t0, int k, int64_t co) {
  if (k == 9 && a.kh == 3 && a.kw == 3) return weight_grad_gemm_tile<V, 9, NV, true>(a, t0, co);
  switch (k) {
#define MDL_WG_TAPS_CASE(n) \
  case n: return weight_grad_gemm_tile<V, n, NV, false>(a, t0, co);
    MDL_WG_TAPS_CASE(1)
    MDL_WG_TAPS_CASE(2)
    MDL_WG_TAPS_CASE(3)
    MDL_WG_TAPS_CASE(4)
    MDL_WG_TAPS_CASE(5)
    MDL_WG_TAPS_CASE(6)
    MDL_WG_TAPS_CASE(7)
    MDL_WG_TAPS_CASE(8)
    MDL_WG_TAPS_CASE(9)
#undef MDL_WG_TAPS_CASE
  }
}

// k taps (at most kWeightGradTaps) from t0, nv vectors (at most V::NVMAX) of output channels from co.
template <class V, class E, class X>
void weight_grad_gemm(const WeightGradTileOf<E, X>& a, int64_t t0, int k, int64_t co, int nv) {
  static_assert(V::NVMAX >= 1 && V::NVMAX <= 2);
  if constexpr (V::NVMAX >= 2)
    if (nv >= 2) return weight_grad_gemm_taps<V, 2>(a, t0, k, co);
  weight_grad_gemm_taps<V, 1>(a, t0, k, co);
}

}  // namespace mdl::cpu::detail
