// The roofline's loops (cpu/roofline_loops.h), each function compiled for its instruction set by
// attribute so the rest of the build stays baseline x86-64. The FMA chains multiply by a number just
// under one and add a small one, so the accumulators neither overflow nor turn denormal.
#include "cpu/roofline_loops.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu/gemm_amx.h"

namespace mdl::cpu::detail {

// The ceilings are the hardware's, whatever the build: sanitizers would keep the accumulators in
// instrumented memory (a sanitized build compiles at -O1) and measure the instrumentation instead.
#define MDL_PROBE_LOOP(isa) __attribute__((target(isa), no_sanitize("address", "undefined", "thread")))

MDL_PROBE_LOOP("avx2,fma") float fma_chains_avx2(int64_t rounds) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  __m256 acc[kFmaChainsAvx2];
#pragma GCC unroll 16
  for (int i = 0; i < kFmaChainsAvx2; ++i) acc[i] = _mm256_set1_ps(float(i));
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kFmaChainsAvx2; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kFmaChainsAvx2; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, sum);
  return out[0] + out[7];
}

MDL_PROBE_LOOP("avx512f") float fma_chains_avx512(int64_t rounds) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  __m512 acc[kFmaChainsAvx512];
#pragma GCC unroll 16
  for (int i = 0; i < kFmaChainsAvx512; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kFmaChainsAvx512; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kFmaChainsAvx512; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, sum);
  return out[0] + out[15];
}

MDL_PROBE_LOOP("avx512f,avx512bf16,avx512bw") float bf16_dot_chains_avx512(int64_t rounds) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.001f), _mm512_set1_ps(0.001f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.002f), _mm512_set1_ps(0.002f));
  __m512 acc[kBf16ChainsAvx512];
#pragma GCC unroll 16
  for (int i = 0; i < kBf16ChainsAvx512; ++i) acc[i] = _mm512_set1_ps(float(i));
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kBf16ChainsAvx512; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kBf16ChainsAvx512; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, sum);
  return out[0] + out[15];
}

// Tiles 0-3 accumulate, 4-5 hold A (16 rows x 32 bf16), 6-7 hold B (16 pairs x 16 columns x 2):
// the layout of gemm_amx.cpp's tile configuration, which configure_amx_tiles() loads.
MDL_PROBE_LOOP("amx-tile,amx-bf16") float amx_bf16_tile_products(int64_t rounds) {
  configure_amx_tiles();
  alignas(64) static const uint16_t kOperand[16 * 32] = {};  // bf16 zeros: the rate does not depend on them
  alignas(64) float out[16 * 16];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, kOperand, 64);
  _tile_loadd(5, kOperand, 64);
  _tile_loadd(6, kOperand, 64);
  _tile_loadd(7, kOperand, 64);
  for (int64_t r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  return out[0];
}

MDL_PROBE_LOOP("avx512f")
void triad_avx512(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes) {
  const __m512 vs = _mm512_set1_ps(s);
  const int64_t vec_end = n / 16 * 16;
  for (int64_t p = 0; p < passes; ++p) {
    for (int64_t i = 0; i < vec_end; i += 16)
      _mm512_storeu_ps(a + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
    for (int64_t i = vec_end; i < n; ++i) a[i] = b[i] + s * c[i];
  }
}

MDL_PROBE_LOOP("avx2,fma")
void triad_avx2(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes) {
  const __m256 vs = _mm256_set1_ps(s);
  const int64_t vec_end = n / 8 * 8;
  for (int64_t p = 0; p < passes; ++p) {
    for (int64_t i = 0; i < vec_end; i += 8)
      _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
    for (int64_t i = vec_end; i < n; ++i) a[i] = b[i] + s * c[i];
  }
}

#undef MDL_PROBE_LOOP

}  // namespace mdl::cpu::detail

#else  // not x86-64: only the plain triad runs (the probe asks has_avx2_fma() and friends first)

#include <cstdlib>

namespace mdl::cpu::detail {
float fma_chains_avx2(int64_t) { std::abort(); }
float fma_chains_avx512(int64_t) { std::abort(); }
float bf16_dot_chains_avx512(int64_t) { std::abort(); }
float amx_bf16_tile_products(int64_t) { std::abort(); }
void triad_avx512(float*, const float*, const float*, float, int64_t, int64_t) { std::abort(); }
void triad_avx2(float*, const float*, const float*, float, int64_t, int64_t) { std::abort(); }
}  // namespace mdl::cpu::detail

#endif

namespace mdl::cpu::detail {

void triad_plain(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes) {
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace mdl::cpu::detail
