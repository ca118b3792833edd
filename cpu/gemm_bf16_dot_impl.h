// f32 GEMM on bf16 pair dot products, for the two files that compile it (cpu/bf16_pairs_avx512bf16.cpp
// with VDPBF16PS, cpu/bf16_pairs_avx512.cpp with AVX-512F alone), each under its own target
// pragma, after the headers below. Everything here is a template on Dot, so the two compilations
// never share a definition.
//
// Packing rounds A and B to bf16 (nearest even, NaN kept; operands given as bf16 bits are taken
// as they are) and puts two consecutive k into one
// 32-bit pair, the element k = 2q in the low half and k = 2q + 1 in the high half:
//   A panel: kp x 12 pairs, a[q*12 + i] = (A[i][2q], A[i][2q+1])
//   B panel: kp x 32 pairs, b[q*32 + j] = (B[2q][j], B[2q+1][j]), 64-byte aligned
// with kp = ceil(kc / 2), an odd kc padded by a zero k. The micro-kernel holds a 12x32 tile of C
// in 24 zmm accumulators. Per pair step it loads two B vectors (32 columns) and, per row, broadcasts
// the row's pair and adds both of its products into each column: Dot::dot(acc, a, b) adds
// a.hi * b.hi, then a.lo * b.lo, into each of the 16 lanes of acc: twice the work of an FMA.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/gemm_bf16_dot.h"
#include "cpu/packing_scratch.h"
#include "cpu/transpose16_avx512.h"

namespace mdl::cpu::bf16_dot {

constexpr int64_t MR = 12, NR = 32;
// A B micro-panel of KC k (KC/2 pairs x 32 columns, 24 KiB) stays in L1, an MC x KC A block in L2,
// a KC x NC B block in L3: the f32 kernel's blocks in bytes.
constexpr int64_t MC = 240, KC = 384, NC = 4096;
static_assert(KC % 2 == 0, "a KC block must hold whole pairs");
static_assert(KC == kPairsKC, "gemm_bf16_dot.h states the pair kernel's K step");

// x's bf16 bits (nearest even; a NaN stays a quiet NaN), in the low 16 bits.
template <class Dot>
inline uint32_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

template <class Dot>
inline uint32_t pair(float lo, float hi) {
  return bf16_bits<Dot>(lo) | bf16_bits<Dot>(hi) << 16;
}

// 16 floats -> their bf16 bits in the high half of each lane, low half zero.
template <class Dot>
inline __m512i bf16_high(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
  return _mm512_and_si512(r, _mm512_set1_epi32(int(0xFFFF0000u)));
}

// Lane-wise pairs of two vectors: (lo[l], hi[l]).
template <class Dot>
inline __m512i pairs_of(__m512 lo, __m512 hi) {
  return _mm512_or_si512(bf16_high<Dot>(hi), _mm512_srli_epi32(bf16_high<Dot>(lo), 16));
}

// Pairs of 32 consecutive floats: (x[2l], x[2l+1]) for l = 0..15.
template <class Dot>
inline __m512i pairs_of_consecutive(const float* x) {
  const __m256i lo = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_high<Dot>(_mm512_loadu_ps(x)), 16));
  const __m256i hi = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_high<Dot>(_mm512_loadu_ps(x + 16)), 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Operands given as bf16 bits are bf16 already: their pair is the two halves side by side.
template <class Dot>
inline uint32_t pair(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | uint32_t(hi) << 16;
}

// The pairs (r0[l], r1[l]) of 16 values of two rows, r1 null: zeros.
template <class Dot>
inline __m512i row_pairs(const float* r0, const float* r1) {
  return pairs_of<Dot>(_mm512_loadu_ps(r0), r1 ? _mm512_loadu_ps(r1) : _mm512_setzero_ps());
}
template <class Dot>
inline __m512i row_pairs(const uint16_t* r0, const uint16_t* r1) {
  const auto widen = [](const uint16_t* r) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r)));
  };
  return _mm512_or_si512(widen(r0), r1 ? _mm512_slli_epi32(widen(r1), 16) : _mm512_setzero_si512());
}

// A block (mc x kc) -> ceil(mc/MR) panels of kp x MR pairs, short panels and an odd kc zero-padded.
// S: float (rounded to bf16 as it is packed), or uint16_t (bf16 bits, taken as they are).
template <class Dot, class S>
void pack_a(int64_t mc, int64_t kc, const S* A, int64_t rsa, int64_t csa, uint32_t* buf) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t ir = 0; ir < mc; ir += MR, buf += kp * MR) {
    const int64_t mr = std::min(MR, mc - ir);
    const S* a = A + ir * rsa;
    const __mmask16 panel = (1u << MR) - 1;
    if constexpr (sizeof(S) == sizeof(float)) {
      if (rsa == 1) {  // columns of A are contiguous: the mr rows of k = 2q and of 2q + 1, absent rows zero
        const __mmask16 rows = __mmask16((1u << mr) - 1);
        for (int64_t q = 0; q < kp; ++q) {
          const __m512 lo = _mm512_maskz_loadu_ps(rows, a + 2 * q * csa);
          const __m512 hi = 2 * q + 1 < kc ? _mm512_maskz_loadu_ps(rows, a + (2 * q + 1) * csa) : _mm512_setzero_ps();
          _mm512_mask_storeu_epi32(buf + q * MR, panel, pairs_of<Dot>(lo, hi));
        }
        continue;
      }
    } else {
      if (rsa == 1) {  // columns of A are contiguous: the mr rows of k = 2q and of 2q + 1, widened
        static_assert(MR == 12);
        const auto widen = [](const S* col) {  // 16 bytes and 8, read in place: no store to forward, no read past
          const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(col));
          const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(col + 8));
          return _mm512_cvtepu16_epi32(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
        };
        alignas(32) S part[16] = {};  // a short panel's column, its absent rows zero
        const auto widen_part = [&](const S* col) {
          for (int64_t i = 0; i < mr; ++i) part[i] = col[i];
          return _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(part)));
        };
        for (int64_t q = 0; q < kp; ++q) {
          const S *c0 = a + 2 * q * csa, *c1 = c0 + csa;
          const bool odd_end = 2 * q + 1 >= kc;
          const __m512i lo = mr == MR ? widen(c0) : widen_part(c0);
          const __m512i hi = odd_end    ? _mm512_setzero_si512()
                             : mr == MR ? _mm512_slli_epi32(widen(c1), 16)
                                        : _mm512_slli_epi32(widen_part(c1), 16);
          _mm512_mask_storeu_epi32(buf + q * MR, panel, _mm512_or_si512(lo, hi));
        }
        continue;
      }
      if (csa == 1) {  // rows of A are contiguous: each pair of k is already one 32-bit word
        int64_t q0 = 0;
        if (mr == MR)  // 16 pairs of each row at a time, the 12 x 16 words transposed in registers
          for (; q0 + 16 <= kc / 2; q0 += 16) {
            __m512 v[16];
            for (int64_t i = 0; i < 16; ++i)
              v[i] = i < MR ? _mm512_castsi512_ps(_mm512_loadu_si512(a + i * rsa + 2 * q0)) : _mm512_setzero_ps();
            transpose16(v);
            for (int64_t q = 0; q < 16; ++q)
              _mm512_mask_storeu_epi32(buf + (q0 + q) * MR, panel, _mm512_castps_si512(v[q]));
          }
        for (int64_t i = 0; i < MR; ++i) {
          const S* r = a + i * rsa;
          for (int64_t q = q0; q < kp; ++q) {
            uint32_t w = 0;
            if (i < mr && 2 * q + 1 < kc) std::memcpy(&w, r + 2 * q, sizeof w);
            else if (i < mr) w = r[2 * q];
            buf[q * MR + i] = w;
          }
        }
        continue;
      }
    }
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t q = 0; q < kp; ++q) {
        const bool in = i < mr;
        const S lo = in ? a[i * rsa + 2 * q * csa] : S(0);
        const S hi = in && 2 * q + 1 < kc ? a[i * rsa + (2 * q + 1) * csa] : S(0);
        buf[q * MR + i] = pair<Dot>(lo, hi);
      }
  }
}

// One B panel (kc x nr, nr <= NR) -> kp x NR pairs, zero-padded; S as in pack_a.
template <class Dot, class S>
void pack_b_panel(int64_t kc, int64_t nr, const S* b, int64_t rsb, int64_t csb, uint32_t* buf) {
  const int64_t kp = (kc + 1) / 2;
  if (nr == NR && csb == 1) {  // rows of B are contiguous: two rows make 32 pairs
    for (int64_t q = 0; q < kp; ++q) {
      const S* r0 = b + 2 * q * rsb;
      const bool odd_end = 2 * q + 1 >= kc;
      for (int h = 0; h < 2; ++h)
        _mm512_store_si512(buf + q * NR + 16 * h, row_pairs<Dot>(r0 + 16 * h, odd_end ? nullptr : r0 + rsb + 16 * h));
    }
    return;
  }
  if (nr == NR && rsb == 1) {  // columns of B are contiguous: 16 pairs of 16 columns transposed in registers
    const int64_t q_whole = kc / 32 * 16;
    for (int64_t j0 = 0; j0 < NR; j0 += 16)
      for (int64_t q0 = 0; q0 < q_whole; q0 += 16) {
        __m512 v[16];  // v[j] = column j0 + j's pairs q0 .. q0 + 15
        for (int64_t j = 0; j < 16; ++j) {
          const S* col = b + (j0 + j) * csb + 2 * q0;
          if constexpr (sizeof(S) == sizeof(float)) v[j] = _mm512_castsi512_ps(pairs_of_consecutive<Dot>(col));
          else v[j] = _mm512_castsi512_ps(_mm512_loadu_si512(col));  // bf16 bits: each pair is one 32-bit word
        }
        transpose16(v);
        for (int64_t q = 0; q < 16; ++q) _mm512_store_si512(buf + (q0 + q) * NR + j0, _mm512_castps_si512(v[q]));
      }
    for (int64_t j = 0; j < NR; ++j)
      for (int64_t q = q_whole; q < kp; ++q)
        buf[q * NR + j] = pair<Dot>(b[j * csb + 2 * q], 2 * q + 1 < kc ? b[j * csb + 2 * q + 1] : S(0));
    return;
  }
  for (int64_t q = 0; q < kp; ++q)
    for (int64_t j = 0; j < NR; ++j) {
      const bool in = j < nr;
      const S lo = in ? b[2 * q * rsb + j * csb] : S(0);
      const S hi = in && 2 * q + 1 < kc ? b[(2 * q + 1) * rsb + j * csb] : S(0);
      buf[q * NR + j] = pair<Dot>(lo, hi);
    }
}

// acc (12 rows x 2 vectors) = a panel . b panel over kp pairs. With kLowLast the last pair's high halves
// are taken as zero in both panels: the k past an odd prefix of an operand packed for a longer k
// (gemm_bf16_dot_packed_impl.h), whose products then equal those of a zero-padded pair, an inf or NaN
// there included.
template <class Dot, bool kLowLast>
[[gnu::always_inline]] inline void accumulate_12x32(int64_t kp, const uint32_t* a, const uint32_t* b,
                                                    __m512 (&acc)[MR][2]) {
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < (kLowLast ? kp - 1 : kp); ++q, a += MR, b += NR) {
    const __m512i b0 = _mm512_load_si512(b), b1 = _mm512_load_si512(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512i ai = _mm512_set1_epi32(int(a[i]));
      acc[i][0] = Dot::dot(acc[i][0], ai, b0);
      acc[i][1] = Dot::dot(acc[i][1], ai, b1);
    }
  }
  if constexpr (kLowLast) {
    const __m512i low = _mm512_set1_epi32(0xFFFF);
    const __m512i b0 = _mm512_and_si512(_mm512_load_si512(b), low),
                  b1 = _mm512_and_si512(_mm512_load_si512(b + 16), low);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512i ai = _mm512_set1_epi32(int(a[i] & 0xFFFFu));
      acc[i][0] = Dot::dot(acc[i][0], ai, b0);
      acc[i][1] = Dot::dot(acc[i][1], ai, b1);
    }
  }
}

// The 12x32 tile of C at c[i*rsc + j*csc] = alpha * (a panel . b panel) + beta * C (C not read
// when beta == 0); kLowLast as accumulate_12x32's.
template <class Dot, bool kLowLast = false>
void kernel_12x32(int64_t kp, const uint32_t* a, const uint32_t* b, float* c, int64_t rsc, int64_t csc, float alpha,
                  float beta) {
  __m512 acc[MR][2];
  accumulate_12x32<Dot, kLowLast>(kp, a, b, acc);
  const __m512 va = _mm512_set1_ps(alpha);
  if (csc == 1) {  // rows of C are contiguous: each row as two vectors, rounded as the loop below rounds
    const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i)
      for (int h = 0; h < 2; ++h) {
        float* ci = c + i * rsc + 16 * h;
        __m512 r = _mm512_mul_ps(va, acc[i][h]);
        if (beta != 0.0f) r = _mm512_add_ps(r, _mm512_mul_ps(vb, _mm512_loadu_ps(ci)));
        _mm512_storeu_ps(ci, r);
      }
    return;
  }
  alignas(64) float t[MR][NR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    _mm512_store_ps(&t[i][0], _mm512_mul_ps(va, acc[i][0]));
    _mm512_store_ps(&t[i][16], _mm512_mul_ps(va, acc[i][1]));
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float& cij = c[i * rsc + j * csc];
      cij = beta == 0.0f ? t[i][j] : t[i][j] + beta * cij;
    }
}

// C block (mc x nc) = alpha * packed A @ packed B + beta * C over kp pairs, one 12x32 tile at a
// time; A's panels lie a_panel pairs apart, B's b_panel. Edge tiles go through a full tile of scratch.
template <class Dot, bool kLowLast = false>
void macro_kernel(int64_t mc, int64_t nc, int64_t kp, float alpha, const uint32_t* a, int64_t a_panel,
                  const uint32_t* b, int64_t b_panel, float beta, float* C, int64_t rsc, int64_t csc) {
  for (int64_t jr = 0; jr < nc; jr += NR)
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t mr = std::min(MR, mc - ir), nr = std::min(NR, nc - jr);
      const uint32_t *ap = a + ir / MR * a_panel, *bp = b + jr / NR * b_panel;
      float* c = C + ir * rsc + jr * csc;
      if (mr == MR && nr == NR) {
        kernel_12x32<Dot, kLowLast>(kp, ap, bp, c, rsc, csc, alpha, beta);
        continue;
      }
      alignas(64) float t[MR * NR];
      kernel_12x32<Dot, kLowLast>(kp, ap, bp, t, NR, 1, alpha, 0.0f);
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) {
          float& cij = c[i * rsc + j * csc];
          cij = beta == 0.0f ? t[i * NR + j] : t[i * NR + j] + beta * cij;
        }
    }
}

// Rows [0, mr) and columns [0, nr) of the 12x32 tile of a bf16 C (rows rsc apart) = bf16(a panel . b
// panel + bias[j]) (bias null: none), the sum rounded once in the registers, as bf16_bits rounds: the
// bits of an f32 C then a pass adding the bias and rounding.
template <class Dot>
void kernel_12x32_to_bf16(int64_t kp, const uint32_t* a, const uint32_t* b, uint16_t* c, int64_t rsc, const float* bias,
                          int64_t mr, int64_t nr) {
  __m512 acc[MR][2];
  accumulate_12x32<Dot, false>(kp, a, b, acc);
  const __mmask16 m0 = __mmask16(nr >= 16 ? 0xFFFF : (1u << nr) - 1), m1 = __mmask16(nr >= 32  ? 0xFFFF
                                                                                     : nr > 16 ? (1u << (nr - 16)) - 1
                                                                                               : 0);
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps(),
               b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  for (int i = 0; i < mr; ++i) {
    uint16_t* ci = c + i * rsc;
    const __m512 r0 = bias ? _mm512_add_ps(acc[i][0], b0) : acc[i][0],
                 r1 = bias ? _mm512_add_ps(acc[i][1], b1) : acc[i][1];
    _mm512_mask_cvtepi32_storeu_epi16(ci, m0, _mm512_srli_epi32(bf16_high<Dot>(r0), 16));  // AVX-512F's narrowing store
    _mm512_mask_cvtepi32_storeu_epi16(ci + 16, m1, _mm512_srli_epi32(bf16_high<Dot>(r1), 16));
  }
}

// C (bf16, M x N, rows rsc apart) = bf16(A @ B + bias[j]) on the calling thread, M, N > 0 and
// 0 < K <= KC: one K step, so each tile is final when the micro-kernel ends and is rounded there; no
// f32 product is written.
template <class Dot>
void gemm_serial_to_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa,
                         const uint16_t* B, int64_t rsb, int64_t csb, const float* bias, uint16_t* C, int64_t rsc) {
  const int64_t kp = (K + 1) / 2;
  uint32_t* abuf = packing_scratch<uint32_t>(0, kp * std::min(MC, (M + MR - 1) / MR * MR));
  uint32_t* bbuf = packing_scratch<uint32_t>(1, kp * std::min(NC, (N + NR - 1) / NR * NR));
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t jr = 0; jr < nc; jr += NR)
      pack_b_panel<Dot>(K, std::min(NR, nc - jr), B + (jc + jr) * csb, rsb, csb, bbuf + jr * kp);
    for (int64_t ic = 0; ic < M; ic += MC) {
      const int64_t mc = std::min(MC, M - ic);
      pack_a<Dot>(mc, K, A + ic * rsa, rsa, csa, abuf);
      for (int64_t jr = 0; jr < nc; jr += NR)
        for (int64_t ir = 0; ir < mc; ir += MR)
          kernel_12x32_to_bf16<Dot>(kp, abuf + ir / MR * kp * MR, bbuf + jr / NR * kp * NR,
                                    C + (ic + ir) * rsc + jc + jr, rsc, bias ? bias + jc + jr : nullptr,
                                    std::min(MR, mc - ir), std::min(NR, nc - jr));
    }
  }
}

// One thread's GEMM; M, N, K > 0. S: float, or uint16_t for operands given as bf16 bits.
template <class Dot, class S>
void gemm_serial(int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t rsa, int64_t csa, const S* B,
                 int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  const int64_t kp_max = (std::min(KC, K) + 1) / 2;
  uint32_t* abuf = packing_scratch<uint32_t>(0, kp_max * std::min(MC, (M + MR - 1) / MR * MR));
  uint32_t* bbuf = packing_scratch<uint32_t>(1, kp_max * std::min(NC, (N + NR - 1) / NR * NR));
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc), kp = (kc + 1) / 2;
      for (int64_t jr = 0; jr < nc; jr += NR)
        pack_b_panel<Dot>(kc, std::min(NR, nc - jr), B + pc * rsb + (jc + jr) * csb, rsb, csb, bbuf + jr * kp);
      const float beta_pc = pc == 0 ? beta : 1.0f;
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        pack_a<Dot>(mc, kc, A + ic * rsa + pc * csa, rsa, csa, abuf);
        macro_kernel<Dot>(mc, nc, kp, alpha, abuf, kp * MR, bbuf, kp * NR, beta_pc, C + ic * rsc + jc * csc, rsc, csc);
      }
    }
  }
}

}  // namespace mdl::cpu::bf16_dot
