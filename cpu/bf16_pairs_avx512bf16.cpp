// The loops on bf16 pairs compiled for VDPBF16PS (AVX512-BF16: Zen 4 and 5, Cooper Lake, Sapphire
// Rapids and later): the GEMM's micro-kernel (cpu/gemm_bf16_dot_impl.h) and its products with operands
// packed once (cpu/gemm_bf16_dot_packed_impl.h), the direct conv's row
// tile (cpu/conv_gemm_impl.h) and its weight-gradient tile (cpu/conv_weight_grad_impl.h). This file alone is compiled for AVX512-BF16 (by pragma, GCC's or
// clang's); gemm.cpp and conv_direct.cpp call it only on a CPU that has it.
#include "cpu/conv_direct.h"
#include "cpu/gemm_bf16_dot.h"

#if defined(__x86_64__)
// The headers come before the target pragma: their functions must not be compiled for AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/packing_scratch.h"

#define MDL_ISA_TARGET "avx512f,avx512bw,avx512bf16"
#include "cpu/isa_target_begin.h"

#include "cpu/bf16_pairs_isa.h"
#include "cpu/conv_gemm_impl.h"
#include "cpu/conv_weight_grad_impl.h"
#include "cpu/gemm_bf16_dot_impl.h"
#include "cpu/gemm_bf16_dot_packed_impl.h"

namespace mdl::cpu {

namespace {
struct NativeDot {
  static __m512 dot(__m512 acc, __m512i a, __m512i b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
};
}  // namespace

void gemm_serial_bf16_dot(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::gemm_serial<NativeDot>(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}
void gemm_serial_bf16_dot(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t rsa, int64_t csa,
                          const uint16_t* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::gemm_serial<NativeDot>(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

void gemm_serial_bf16_dot_to_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa,
                                  const uint16_t* B, int64_t rsb, int64_t csb, const float* bias, uint16_t* C,
                                  int64_t rsc) {
  bf16_dot::gemm_serial_to_bf16<NativeDot>(M, N, K, A, rsa, csa, B, rsb, csb, bias, C, rsc);
}

void times_panel_pairs(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* panel, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_panel<NativeDot>(packed, M, K, m, n, k, alpha, panel, beta, C, rsc, csc);
}
void times_pairs_b(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                   const float* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_b<NativeDot>(packed, K, N, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
}
void times_panel_pairs(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t* panel, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_panel<NativeDot>(packed, M, K, m, n, k, alpha, panel, beta, C, rsc, csc);
}
void times_pairs_b(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                   const uint16_t* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc) {
  bf16_dot::times_b<NativeDot>(packed, K, N, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
}

void detail::conv_gemm_row_bf16(const ConvGemmRowPairs& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv) {
  detail::conv_gemm_row<bf16_dot::PairIsa<NativeDot>>(a, oh, ow0, k, co, nv);
}

void detail::weight_grad_gemm_bf16(const WeightGradTilePairs& a, int64_t t0, int k, int64_t co, int nv) {
  detail::weight_grad_gemm<bf16_dot::PairIsa<NativeDot>>(a, t0, k, co, nv);
}

}  // namespace mdl::cpu

#include "cpu/isa_target_end.h"

#else  // not x86-64: never called (no CPU there has AVX512-BF16)

#include <cstdlib>
namespace mdl::cpu {
void gemm_serial_bf16_dot(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*, int64_t,
                          int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void gemm_serial_bf16_dot(int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t,
                          int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void gemm_serial_bf16_dot_to_bf16(int64_t, int64_t, int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*,
                                  int64_t, int64_t, const float*, uint16_t*, int64_t) {
  std::abort();
}
void times_panel_pairs(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const float*, float, float*,
                       int64_t, int64_t) {
  std::abort();
}
void times_pairs_b(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                   float, float*, int64_t, int64_t) {
  std::abort();
}
void times_panel_pairs(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const uint16_t*, float,
                       float*, int64_t, int64_t) {
  std::abort();
}
void times_pairs_b(const uint32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t,
                   int64_t, float, float*, int64_t, int64_t) {
  std::abort();
}
void detail::conv_gemm_row_bf16(const ConvGemmRowPairs&, int64_t, int64_t, int, int64_t, int) { std::abort(); }
void detail::weight_grad_gemm_bf16(const WeightGradTilePairs&, int64_t, int, int64_t, int) { std::abort(); }
}  // namespace mdl::cpu

#endif
