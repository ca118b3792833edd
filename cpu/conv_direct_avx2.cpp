// The direct convolution's AVX2 loops: 8-float columns; forward 3 channels x 3 rows of
// accumulators (9 of the 16 ymm registers, with the weights and a row beside them), weight
// gradient 2 channels x 5 taps (10). This file alone is compiled for AVX2 and FMA (by pragma,
// GCC's or clang's).
#include "cpu/conv_direct.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#include "cpu/conv_direct_impl.h"

namespace mdl::cpu::detail {

namespace {
struct Avx2 {
  using reg = __m256;
  static constexpr int L = 8, RMAX = 3, SMAX = 3, GR = kWeightGradChannels, GT = 5;
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg set1(float f) { return _mm256_set1_ps(f); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static __m256i first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static void store_first(float* p, reg v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  static reg load_first(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  static float sum(reg v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
  }
};
static_assert(Avx2::L == kDirectLanesAvx2);
}  // namespace

void direct_conv_plane_avx2(const DirectConvPlane& a, int64_t co0, int64_t co1) { direct_plane<Avx2>(a, co0, co1); }
void direct_conv_weight_grad_avx2(const DirectConvWeightGrad& a, int64_t co, int r, int64_t c) {
  weight_grad<Avx2>(a, co, r, c);
}

}  // namespace mdl::cpu::detail
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
#include <cstdlib>
namespace mdl::cpu::detail {
void direct_conv_plane_avx2(const DirectConvPlane&, int64_t, int64_t) { std::abort(); }  // never chosen here
void direct_conv_weight_grad_avx2(const DirectConvWeightGrad&, int64_t, int, int64_t) { std::abort(); }
}  // namespace mdl::cpu::detail
#endif
