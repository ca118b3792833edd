// The direct convolution's AVX2 loops: 8-float columns; forward 3 channels x 3 rows of
// accumulators (9 of the 16 ymm registers, with the weights and a row beside them), weight
// gradient 9 taps x 8 output channels (9); row tile 8 pixels x 8 output channels (8). This file alone is compiled for AVX2 and FMA (by pragma,
// GCC's or clang's).
#include "cpu/conv_direct.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MDL_ISA_TARGET "avx2,fma"
#include "cpu/isa_target_begin.h"

#include "cpu/conv_direct_impl.h"
#include "cpu/conv_gemm_impl.h"
#include "cpu/conv_weight_grad_impl.h"

namespace mdl::cpu::detail {

namespace {
struct Avx2 {
  using reg = __m256;
  static constexpr int L = 8, RMAX = 3, SMAX = 3, NVMAX = kWeightGradVectorsAvx2, KMAX = kConvRowPixelsAvx2;
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg set1(float f) { return _mm256_set1_ps(f); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static __m256i first(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static void store_first(float* p, reg v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  static reg load_first(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
};
static_assert(Avx2::L == kDirectLanesAvx2 && kConvRowVectorsAvx2 == kWeightGradVectorsAvx2);
}  // namespace

void direct_conv_plane_avx2(const DirectConvPlane& a, int64_t co0, int64_t co1) { direct_plane<Avx2>(a, co0, co1); }
void conv_gemm_row_avx2(const ConvGemmRow& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv) {
  conv_gemm_row<Avx2>(a, oh, ow0, k, co, nv);
}
void weight_grad_gemm_avx2(const WeightGradTile& a, int64_t t0, int k, int64_t co, int nv) {
  weight_grad_gemm<Avx2>(a, t0, k, co, nv);
}

// 8 x 8 blocks, each 8 row loads, three rounds of shuffles and 8 column stores; the edges
// element by element.
// Column blocks outside, rows inside: each block of 8 destination rows is written front to back.
// Rows outside sent each 8x8 block to 8 of all `cols` destination rows: with a destination stride
// of 4 KiB (a 32x32 map) those rows share one L1 set, and a 64-channel sample's transpose ran at a
// fifth of the rate.
void transpose_rows_avx2(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                         int64_t dst_stride) {
  int64_t q = 0;
  for (; q + 8 <= cols; q += 8) {
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8) {
      __m256 v[8], t[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(src + (r + i) * src_stride + q);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        v[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + (q + i) * dst_stride + r, _mm256_permute2f128_ps(v[i], v[i + 4], 0x20));
        _mm256_storeu_ps(dst + (q + i + 4) * dst_stride + r, _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
      }
    }
    for (; r < rows; ++r)
      for (int64_t i = q; i < q + 8; ++i) dst[i * dst_stride + r] = src[r * src_stride + i];
  }
  for (; q < cols; ++q)
    for (int64_t r = 0; r < rows; ++r) dst[q * dst_stride + r] = src[r * src_stride + q];
}

}  // namespace mdl::cpu::detail
#include "cpu/isa_target_end.h"
#else
#include <cstdlib>
namespace mdl::cpu::detail {
void direct_conv_plane_avx2(const DirectConvPlane&, int64_t, int64_t) { std::abort(); }  // never chosen here
void weight_grad_gemm_avx2(const WeightGradTile&, int64_t, int, int64_t, int) { std::abort(); }
void conv_gemm_row_avx2(const ConvGemmRow&, int64_t, int64_t, int, int64_t, int) { std::abort(); }
void transpose_rows_avx2(const float*, int64_t, int64_t, int64_t, float*, int64_t) { std::abort(); }
}  // namespace mdl::cpu::detail
#endif
