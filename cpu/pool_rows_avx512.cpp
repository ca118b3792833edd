// The 2x2 / stride 2 max pool's output row on AVX-512: 16 outputs a pass, the row's end masked,
// so SimpleCNN's rows of 14 and 7 outputs take one pass each. f32 rows split each pair of 16-float
// vectors into even and odd columns by two permutes; bf16 rows load each window's column pair as
// one 32-bit word, whose halves are the even and odd values. Winners, NaN rule and visiting order
// are the scalar loop's (cpu/pool.cpp). This file alone is compiled for AVX-512F (by pragma).
#include "cpu/pool_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"

namespace mdl::cpu::detail {

namespace {

// 16 windows: the winner of row 0's even and odd columns and row 1's (e0, o0, e1, o1), visited in
// that order; a later candidate wins when greater, or when NaN. at: row 0's even column's index.
struct Winner {
  __m512 best;
  __m512i arg;
  Winner(__m512 e0, __m512 o0, __m512 e1, __m512 o1, __m512i at, int64_t W) : best(e0), arg(at) {
    visit(o0, _mm512_add_epi32(at, _mm512_set1_epi32(1)));
    visit(e1, _mm512_add_epi32(at, _mm512_set1_epi32(int32_t(W))));
    visit(o1, _mm512_add_epi32(at, _mm512_set1_epi32(int32_t(W + 1))));
  }
  void visit(__m512 v, __m512i at) {
    const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    best = _mm512_mask_mov_ps(best, take, v);
    arg = _mm512_mask_mov_epi32(arg, take, at);
  }
  // The first n indices, as int64.
  void store_indices(int64_t* idx, __mmask16 lanes) const {
    _mm512_mask_storeu_epi64(idx, __mmask8(lanes), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(arg)));
    _mm512_mask_storeu_epi64(idx + 8, __mmask8(lanes >> 8), _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(arg, 1)));
  }
};

// Row 0's even column's index for the 16 windows from ow.
__m512i first_index(int64_t base, int64_t ow) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_add_epi32(_mm512_set1_epi32(int32_t(base + 2 * ow)), even);
}

__mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

}  // namespace

void max_pool_2x2_row_avx512(const float* r0, const float* r1, int64_t base, int64_t W, int64_t Wo, float* out,
                             int64_t* idx) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  for (int64_t ow = 0; ow < Wo; ow += 16) {
    const int64_t n = Wo - ow;  // windows left; this pass takes min(n, 16)
    const __mmask16 lanes = first_lanes(n), lo = first_lanes(2 * n), hi = n > 8 ? first_lanes(2 * n - 16) : 0;
    const float *a = r0 + 2 * ow, *c = r1 + 2 * ow;
    const __m512 a0 = _mm512_maskz_loadu_ps(lo, a), a1 = _mm512_maskz_loadu_ps(hi, a + 16);
    const __m512 c0 = _mm512_maskz_loadu_ps(lo, c), c1 = _mm512_maskz_loadu_ps(hi, c + 16);
    const Winner w(_mm512_permutex2var_ps(a0, evens, a1), _mm512_permutex2var_ps(a0, odds, a1),
                   _mm512_permutex2var_ps(c0, evens, c1), _mm512_permutex2var_ps(c0, odds, c1), first_index(base, ow),
                   W);
    _mm512_mask_storeu_ps(out + ow, lanes, w.best);
    w.store_indices(idx + ow, lanes);
  }
}

void max_pool_2x2_row_avx512(const uint16_t* r0, const uint16_t* r1, int64_t base, int64_t W, int64_t Wo, uint16_t* out,
                             int64_t* idx) {
  const __m512i high = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  for (int64_t ow = 0; ow < Wo; ow += 16) {
    const __mmask16 lanes = first_lanes(Wo - ow);
    // Window j's columns (2j, 2j + 1) are the 32-bit word j: the even value in its low half.
    const __m512i a = _mm512_maskz_loadu_epi32(lanes, r0 + 2 * ow), c = _mm512_maskz_loadu_epi32(lanes, r1 + 2 * ow);
    const Winner w(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)), _mm512_castsi512_ps(_mm512_and_si512(a, high)),
                   _mm512_castsi512_ps(_mm512_slli_epi32(c, 16)), _mm512_castsi512_ps(_mm512_and_si512(c, high)),
                   first_index(base, ow), W);
    // The winner is one of the inputs: its high half is its bf16 value.
    _mm512_mask_cvtepi32_storeu_epi16(out + ow, lanes, _mm512_srli_epi32(_mm512_castps_si512(w.best), 16));
    w.store_indices(idx + ow, lanes);
  }
}

}  // namespace mdl::cpu::detail

#include "cpu/isa_target_end.h"

#else
#include <cstdlib>
namespace mdl::cpu::detail {
void max_pool_2x2_row_avx512(const float*, const float*, int64_t, int64_t, int64_t, float*, int64_t*) {
  std::abort();  // never chosen here
}
void max_pool_2x2_row_avx512(const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, uint16_t*, int64_t*) {
  std::abort();
}
}  // namespace mdl::cpu::detail
#endif
