// The direct convolution's register-blocked loop, written once over a vector type V (AVX-512's
// 16 floats or AVX2's 8) and included by one file per ISA, each compiled for its ISA by pragma
// (so it calls nothing from the standard library, whose inline copies would get that ISA too).
// A tile is R output channels x S output rows x one L-wide chunk of columns, held in R*S vector
// accumulators that start at the bias; each (c, ki, kj) step broadcasts R weights and loads S
// shifted input rows from the zero-padded sample, so no column matrix is ever built. Convs with
// several input and output channels take the row tile (cpu/conv_gemm_impl.h) instead, and the
// weight gradient has its own, cpu/conv_weight_grad_impl.h.
#pragma once
#include <cstdint>

#include "cpu/conv_direct.h"

namespace mdl::cpu::detail {

#define MDL_DIRECT_INLINE [[gnu::always_inline]] inline

// V: using reg; L (lanes); RMAX, SMAX (the largest forward tile its registers hold); load(p),
// load_first(p, n) (lanes from n on zero), set1(f), fma(a, b, c) = a * b + c, store(p, v),
// store_first(p, v, n) (n < L lanes).
//
// Forward tile: out[co + r, oh + s, ow .. ow + L) for r < R, s < S. a.w is packed by channel
// block: w[((co / RMAX * cin + c) * kh + ki) * kw + kj) * RMAX + r], so one step's R weights are
// adjacent. KW: the kernel width when known at compile time (its loop unrolled), else 0.
// Input channels [a.c0, a.c1) are summed: the first block starts from the bias, a later one from
// what the earlier ones stored.
template <class V, int R, int S, int KW>
MDL_DIRECT_INLINE void direct_tile(const DirectConvPlane& a, int64_t co, int64_t oh, int64_t ow) {
  using reg = typename V::reg;
  const int64_t kw = KW ? KW : a.kw, n = a.wo - ow;
  reg acc[R][S];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const reg b = V::set1(a.bias ? a.bias[co + r] : 0.0f);
#pragma GCC unroll 6
    for (int s = 0; s < S; ++s) {
      const float* o = a.out + (co + r) * a.ho * a.wo + (oh + s) * a.wo + ow;
      acc[r][s] = a.c0 == 0 ? b : n >= V::L ? V::load(o) : V::load_first(o, int(n));
    }
  }
  const float* w = a.w + (co / V::RMAX * a.cin + a.c0) * a.kh * kw * V::RMAX;
  const float* x = a.xp + a.c0 * a.plane + oh * a.wq + ow;
  for (int64_t c = a.c0; c < a.c1; ++c, x += a.plane)
    for (int64_t ki = 0; ki < a.kh; ++ki) {
      const float* xk = x + ki * a.wq;
#pragma GCC unroll 8
      for (int64_t kj = 0; kj < kw; ++kj, w += V::RMAX) {
        reg wv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) wv[r] = V::set1(w[r]);
#pragma GCC unroll 6
        for (int s = 0; s < S; ++s) {
          const reg xv = V::load(xk + s * a.wq + kj);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) acc[r][s] = V::fma(wv[r], xv, acc[r][s]);
        }
      }
    }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
    for (int s = 0; s < S; ++s) {
      float* o = a.out + (co + r) * a.ho * a.wo + (oh + s) * a.wo + ow;
      if (n >= V::L) V::store(o, acc[r][s]);
      else V::store_first(o, acc[r][s], int(n));
    }
}

// The rows [oh, oh + S) of every column chunk, for R channels from co.
template <class V, int R, int S>
void direct_rows(const DirectConvPlane& a, int64_t co, int64_t oh) {
  if (a.kw == 3)
    for (int64_t ow = 0; ow < a.wo; ow += V::L) direct_tile<V, R, S, 3>(a, co, oh, ow);
  else
    for (int64_t ow = 0; ow < a.wo; ow += V::L) direct_tile<V, R, S, 0>(a, co, oh, ow);
}

template <class V, int R>
void direct_rows_any(const DirectConvPlane& a, int64_t co, int64_t oh, int s) {
  static_assert(V::SMAX >= 1 && V::SMAX <= 6);
  switch (s) {
    case 1: return direct_rows<V, R, 1>(a, co, oh);
    case 2: return direct_rows<V, R, 2>(a, co, oh);
    case 3: return direct_rows<V, R, 3>(a, co, oh);
    case 4:
      if constexpr (V::SMAX >= 4) return direct_rows<V, R, 4>(a, co, oh);
      break;
    case 5:
      if constexpr (V::SMAX >= 5) return direct_rows<V, R, 5>(a, co, oh);
      break;
    case 6:
      if constexpr (V::SMAX >= 6) return direct_rows<V, R, 6>(a, co, oh);
      break;
  }
}

// R = min(RMAX, co1 - co) output channels from co, rows [oh, oh + s).
template <class V>
void direct_block(const DirectConvPlane& a, int64_t co, int64_t co1, int64_t oh, int64_t s) {
  switch (co1 - co < V::RMAX ? co1 - co : V::RMAX) {
    case 1: return direct_rows_any<V, 1>(a, co, oh, int(s));
    case 2: return direct_rows_any<V, 2>(a, co, oh, int(s));
    case 3: return direct_rows_any<V, 3>(a, co, oh, int(s));
    default:
      if constexpr (V::RMAX >= 4) direct_rows_any<V, 4>(a, co, oh, int(s));
  }
}

// Output channels [co0, co1) of one sample and group, in blocks of RMAX channels, the rows cut
// into near-equal blocks of at most SMAX, the input channels into blocks whose rows for one row
// block fit in half of L1: those rows stay in L1 while the channel blocks take their turns.
template <class V>
void direct_plane(const DirectConvPlane& plane, int64_t co0, int64_t co1) {
  DirectConvPlane a = plane;
  const int64_t row_blocks = (a.ho + V::SMAX - 1) / V::SMAX;
  const int64_t row_bytes = (V::SMAX + a.kh - 1) * a.wq * int64_t(sizeof(float));
  const int64_t channels = row_bytes >= (int64_t(24) << 10) ? 1 : (int64_t(24) << 10) / row_bytes;
  auto rows = [&](int64_t rb) { return a.ho * rb / row_blocks; };
  for (int64_t rb = 0; rb < row_blocks; ++rb)
    for (a.c0 = 0; a.c0 < a.cin; a.c0 = a.c1) {
      a.c1 = a.cin - a.c0 < channels ? a.cin : a.c0 + channels;
      for (int64_t co = co0; co < co1; co += V::RMAX) direct_block<V>(a, co, co1, rows(rb), rows(rb + 1) - rows(rb));
    }
}

}  // namespace mdl::cpu::detail
