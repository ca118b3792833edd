// The loops on bf16 pairs on AVX-512F alone: the GEMM's micro-kernel and the direct conv's tiles
// with each VDPBF16PS written as the two FMAs it performs, the odd element's product first (exact,
// since a product of two bf16 fits in f32), then the even one's. Their packing and loops are the
// native ones (cpu/bf16_pairs_avx512bf16.cpp), so tests check them on any AVX-512 CPU. Also the
// conversions of f32 planes into pairs and into bf16, and the packing of operands packed once
// (cpu/gemm_bf16_dot_packed_impl.h), which both use. This file alone is compiled for AVX-512F (by
// pragma, GCC's or clang's).
#include "cpu/conv_direct.h"
#include "cpu/gemm_bf16_dot.h"

#if defined(__x86_64__)
// The headers come before the target pragma: their functions must not be compiled for AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/packing_scratch.h"

#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"

#include "cpu/bf16_pairs_isa.h"
#include "cpu/conv_gemm_impl.h"
#include "cpu/conv_weight_grad_impl.h"
#include "cpu/gemm_bf16_dot_impl.h"
#include "cpu/gemm_bf16_dot_packed_impl.h"

namespace mdl::cpu {

namespace {
struct EmulatedDot {
  static __m512 dot(__m512 acc, __m512i a, __m512i b) {
    const __m512i high = _mm512_set1_epi32(int(0xFFFF0000u));
    auto odd = [&](__m512i v) { return _mm512_castsi512_ps(_mm512_and_si512(v, high)); };
    auto even = [](__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); };
    acc = _mm512_fmadd_ps(odd(a), odd(b), acc);
    return _mm512_fmadd_ps(even(a), even(b), acc);
  }
};
}  // namespace

void gemm_serial_bf16_dot_emulated(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa,
                                   int64_t csa, const float* B, int64_t rsb, int64_t csb, float beta, float* C,
                                   int64_t rsc, int64_t csc) {
  bf16_dot::gemm_serial<EmulatedDot>(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}
void gemm_serial_bf16_dot_emulated(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t rsa,
                                   int64_t csa, const uint16_t* B, int64_t rsb, int64_t csb, float beta, float* C,
                                   int64_t rsc, int64_t csc) {
  bf16_dot::gemm_serial<EmulatedDot>(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

void gemm_serial_bf16_dot_to_bf16_emulated(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa,
                                           const uint16_t* B, int64_t rsb, int64_t csb, const float* bias, uint16_t* C,
                                           int64_t rsc) {
  bf16_dot::gemm_serial_to_bf16<EmulatedDot>(M, N, K, A, rsa, csa, B, rsb, csb, bias, C, rsc);
}

void pack_a_pairs(int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa, uint32_t* buf) {
  bf16_dot::pack_a_whole<EmulatedDot>(M, K, A, rsa, csa, buf);
}
void pack_b_pairs(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, uint32_t* buf) {
  bf16_dot::pack_b_whole<EmulatedDot>(K, N, B, rsb, csb, buf);
}
void times_panel_pairs_emulated(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* panel, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_panel<EmulatedDot>(packed, M, K, m, n, k, alpha, panel, beta, C, rsc, csc);
}
void times_pairs_b_emulated(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                            const float* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_b<EmulatedDot>(packed, K, N, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
}
void pack_a_pairs(int64_t M, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa, uint32_t* buf) {
  bf16_dot::pack_a_whole<EmulatedDot>(M, K, A, rsa, csa, buf);
}
void times_panel_pairs_emulated(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k,
                                float alpha, const uint16_t* panel, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_panel<EmulatedDot>(packed, M, K, m, n, k, alpha, panel, beta, C, rsc, csc);
}
void times_pairs_b_emulated(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                            const uint16_t* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc,
                            int64_t csc) {
  bf16_dot::times_b<EmulatedDot>(packed, K, N, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
}

void detail::conv_gemm_row_bf16_emulated(const ConvGemmRowPairs& a, int64_t oh, int64_t ow0, int k, int64_t co,
                                         int nv) {
  detail::conv_gemm_row<bf16_dot::PairIsa<EmulatedDot>>(a, oh, ow0, k, co, nv);
}

void detail::weight_grad_gemm_bf16_emulated(const WeightGradTilePairs& a, int64_t t0, int k, int64_t co, int nv) {
  detail::weight_grad_gemm<bf16_dot::PairIsa<EmulatedDot>>(a, t0, k, co, nv);
}

void detail::bf16_pairs_avx512(const float* lo, const float* hi, int64_t n, uint32_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 h = hi ? _mm512_loadu_ps(hi + i) : _mm512_setzero_ps();
    _mm512_storeu_si512(out + i, bf16_dot::pairs_of<EmulatedDot>(_mm512_loadu_ps(lo + i), h));
  }
  for (; i < n; ++i) out[i] = bf16_dot::pair<EmulatedDot>(lo[i], hi ? hi[i] : 0.0f);
}

void detail::bf16_bits_avx512(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i bits = _mm512_srli_epi32(bf16_dot::bf16_high<EmulatedDot>(_mm512_loadu_ps(src + i)), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(bits));
  }
  for (; i < n; ++i) dst[i] = uint16_t(bf16_dot::bf16_bits<EmulatedDot>(src[i]));
}

}  // namespace mdl::cpu

#include "cpu/isa_target_end.h"

#else  // not x86-64: never called (no AVX-512 there)

#include <cstdlib>
namespace mdl::cpu {
void gemm_serial_bf16_dot_emulated(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*,
                                   int64_t, int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void gemm_serial_bf16_dot_emulated(int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, int64_t, const uint16_t*,
                                   int64_t, int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void gemm_serial_bf16_dot_to_bf16_emulated(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t,
                                           const uint16_t*, int64_t, int64_t, const float*, uint16_t*, int64_t) {
  std::abort();
}
void pack_a_pairs(int64_t, int64_t, const float*, int64_t, int64_t, uint32_t*) { std::abort(); }
void pack_b_pairs(int64_t, int64_t, const float*, int64_t, int64_t, uint32_t*) { std::abort(); }
void times_panel_pairs_emulated(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const float*,
                                float, float*, int64_t, int64_t) {
  std::abort();
}
void times_pairs_b_emulated(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t,
                            int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void pack_a_pairs(int64_t, int64_t, const uint16_t*, int64_t, int64_t, uint32_t*) { std::abort(); }
void times_panel_pairs_emulated(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const uint16_t*,
                                float, float*, int64_t, int64_t) {
  std::abort();
}
void times_pairs_b_emulated(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const uint16_t*,
                            int64_t, int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void detail::conv_gemm_row_bf16_emulated(const ConvGemmRowPairs&, int64_t, int64_t, int, int64_t, int) { std::abort(); }
void detail::bf16_pairs_avx512(const float*, const float*, int64_t, uint32_t*) { std::abort(); }
void detail::weight_grad_gemm_bf16_emulated(const WeightGradTilePairs&, int64_t, int, int64_t, int) { std::abort(); }
void detail::bf16_bits_avx512(const float*, int64_t, uint16_t*) { std::abort(); }
}  // namespace mdl::cpu

#endif
