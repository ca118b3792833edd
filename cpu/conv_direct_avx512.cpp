// The direct convolution's AVX-512 loops: 16-float columns; forward 4 channels x 6 rows of
// accumulators (24 of the 32 zmm registers), or 8 pixels x 32 output channels (16); weight
// gradient 9 taps x 32 output channels (18). This file
// alone is compiled for AVX-512F (by pragma, GCC's or clang's).
#include "cpu/conv_direct.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"

#include "cpu/conv_direct_impl.h"
#include "cpu/conv_gemm_impl.h"
#include "cpu/conv_weight_grad_impl.h"

namespace mdl::cpu::detail {

namespace {
struct Avx512 {
  using reg = __m512;
  static constexpr int L = 16, RMAX = 4, SMAX = 6, NVMAX = kWeightGradVectorsAvx512, KMAX = kConvRowPixelsAvx512;
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg set1(float f) { return _mm512_set1_ps(f); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static reg load_first(const float* p, int n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); }
  static void store_first(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), v); }
};
static_assert(Avx512::L == kDirectLanesAvx512 && kConvRowVectorsAvx512 == kWeightGradVectorsAvx512);
}  // namespace

void direct_conv_plane_avx512(const DirectConvPlane& a, int64_t co0, int64_t co1) { direct_plane<Avx512>(a, co0, co1); }
void conv_gemm_row_avx512(const ConvGemmRow& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv) {
  conv_gemm_row<Avx512>(a, oh, ow0, k, co, nv);
}
void weight_grad_gemm_avx512(const WeightGradTile& a, int64_t t0, int k, int64_t co, int nv) {
  weight_grad_gemm<Avx512>(a, t0, k, co, nv);
}

}  // namespace mdl::cpu::detail
#include "cpu/isa_target_end.h"
#else
#include <cstdlib>
namespace mdl::cpu::detail {
void direct_conv_plane_avx512(const DirectConvPlane&, int64_t, int64_t) { std::abort(); }  // never chosen here
void weight_grad_gemm_avx512(const WeightGradTile&, int64_t, int, int64_t, int) { std::abort(); }
void conv_gemm_row_avx512(const ConvGemmRow&, int64_t, int64_t, int, int64_t, int) { std::abort(); }
}  // namespace mdl::cpu::detail
#endif
