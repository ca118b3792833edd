// A 16 x 16 block of 32-bit values transposed in AVX-512F registers, for the files compiled for
// AVX-512 that include it inside their target regions (cpu/transpose_blocks_avx512.cpp, the bf16
// pair kernels' packing): internal linkage, so each region keeps its own copy.
#pragma once
#include <immintrin.h>

namespace mdl::cpu {
namespace {

// v[k] = column k of a 16 x 16 block (its 16 rows) -> v[r] = row r (its 16 columns): 2-, 4- and
// 8-element interleaves within 128-bit lanes, then two lane shuffles.
[[gnu::always_inline]] inline void transpose16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]),
                  c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    v[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    v[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    v[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    v[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(v[8 * i + j], v[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(v[8 * i + j], v[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    v[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
    v[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
    v[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd);
  }
}

}  // namespace
}  // namespace mdl::cpu
