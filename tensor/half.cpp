// Bulk f16/bf16 conversions: F16C (8 lanes, round-to-nearest-even) when the CPU has it,
// the scalar conversions of half.h otherwise. Both give identical bits.
#include "tensor/half.h"

#include <immintrin.h>

namespace mdl {

bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

namespace {
__attribute__((target("f16c,avx"))) void f32_to_f16_f16c(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = Half(src[i]);
}

__attribute__((target("f16c,avx"))) void f16_to_f32_f16c(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = float(src[i]);
}
}  // namespace

void f32_to_f16(const float* src, Half* dst, int64_t n) {
  if (cpu_has_f16c()) return f32_to_f16_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = Half(src[i]);
}

void f16_to_f32(const Half* src, float* dst, int64_t n) {
  if (cpu_has_f16c()) return f16_to_f32_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
}

void f32_to_bf16(const float* src, BFloat16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16(src[i]);
}

void bf16_to_f32(const BFloat16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
}

}  // namespace mdl
