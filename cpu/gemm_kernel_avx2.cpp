// The AVX2/FMA f32 micro-kernel: a 6x16 tile of C held in 12 ymm accumulators, fed by one
// packed A micro-panel (6 rows) and one packed B micro-panel (16 columns). Compiled for
// avx2+fma by attribute, so the rest of the build stays baseline x86-64; gemm.cpp picks it at run time.
#include <immintrin.h>

#include <cstdint>

namespace mdl::cpu::detail {

// a: kc x 6 (a[p*6 + i]), b: kc x 16 (b[p*16 + j]), both 32-byte aligned.
// C tile (6x16) at c[i*rsc + j*csc] = alpha * a^T b + beta * C; C is not read when beta == 0.
__attribute__((target("avx2,fma"))) void sgemm_kernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                                int64_t rsc, int64_t csc, float alpha, float beta) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();

  if (csc == 1)
    for (int i = 0; i < 6; ++i) _mm_prefetch(reinterpret_cast<const char*>(c + i * rsc), _MM_HINT_T0);

#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    _mm_prefetch(reinterpret_cast<const char*>(b + 16 * 8), _MM_HINT_T0);
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
    __m256 ai = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    c51 = _mm256_fmadd_ps(ai, b1, c51);
    a += 6;
    b += 16;
  }

  const __m256 va = _mm256_set1_ps(alpha);
  __m256 acc[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
  if (csc == 1) {
    const __m256 vb = _mm256_set1_ps(beta);
    for (int i = 0; i < 6; ++i) {
      float* ci = c + i * rsc;
      for (int h = 0; h < 2; ++h) {
        __m256 r = _mm256_mul_ps(va, acc[2 * i + h]);
        if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8 * h), r);
        _mm256_storeu_ps(ci + 8 * h, r);
      }
    }
    return;
  }
  alignas(32) float t[6][16];
  for (int i = 0; i < 6; ++i) {
    _mm256_store_ps(&t[i][0], _mm256_mul_ps(va, acc[2 * i]));
    _mm256_store_ps(&t[i][8], _mm256_mul_ps(va, acc[2 * i + 1]));
  }
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 16; ++j) {
      float& cij = c[i * rsc + j * csc];
      cij = beta == 0.0f ? t[i][j] : t[i][j] + beta * cij;
    }
}

}  // namespace mdl::cpu::detail
