// The AVX-512 f32 micro-kernel: a 12x32 tile of C held in 24 zmm accumulators, fed by one packed
// A micro-panel (12 rows, broadcast one float at a time) and one packed B micro-panel (32 columns,
// two zmm loads). 24 independent FMA chains cover the FMA latency on two ports; 27 of the 32 zmm
// registers are live. Compiled for avx512f by attribute; gemm.cpp picks it at run time.
#include <immintrin.h>

#include <cstdint>

namespace mdl::cpu::detail {

// a: kc x 12 (a[p*12 + i]), b: kc x 32 (b[p*32 + j]), b 64-byte aligned.
// C tile (12x32) at c[i*rsc + j*csc] = alpha * a^T b + beta * C; C is not read when beta == 0.
__attribute__((target("avx512f"))) void sgemm_kernel_12x32_avx512(int64_t kc, const float* a, const float* b, float* c,
                                                                  int64_t rsc, int64_t csc, float alpha, float beta) {
  __m512 acc[12][2];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();

  if (csc == 1)
    for (int i = 0; i < 12; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * rsc), _MM_HINT_T0);

#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    _mm_prefetch(reinterpret_cast<const char*>(b + 32 * 8), _MM_HINT_T0);
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += 12;
    b += 32;
  }

  const __m512 va = _mm512_set1_ps(alpha);
  if (csc == 1) {
    const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      float* ci = c + i * rsc;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512 r = _mm512_mul_ps(va, acc[i][h]);
        if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16 * h), r);
        _mm512_storeu_ps(ci + 16 * h, r);
      }
    }
    return;
  }
  alignas(64) float t[12][32];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) {
    _mm512_store_ps(&t[i][0], _mm512_mul_ps(va, acc[i][0]));
    _mm512_store_ps(&t[i][16], _mm512_mul_ps(va, acc[i][1]));
  }
  for (int i = 0; i < 12; ++i)
    for (int j = 0; j < 32; ++j) {
      float& cij = c[i * rsc + j * csc];
      cij = beta == 0.0f ? t[i][j] : t[i][j] + beta * cij;
    }
}

}  // namespace mdl::cpu::detail
