// The bf16 pair-dot GEMM on AVX-512F alone: each VDPBF16PS is written as the two FMAs it performs,
// the odd k's product first (exact, since a product of two bf16 fits in f32), then the even k's.
// The packing and the loops are the native kernel's, so tests check them on any AVX-512 CPU.
// This file alone is compiled for AVX-512F (by pragma, GCC's or clang's).
#include "cpu/gemm_bf16_dot.h"

#if defined(__x86_64__)
// The headers come before the target pragma: their functions must not be compiled for AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/packing_scratch.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
// GCC 12 takes the _mm512_undefined_*() inside its shift and narrowing intrinsics for uninitialised
// reads (PR 105593, fixed in GCC 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f")
#endif

#include "cpu/gemm_bf16_dot_impl.h"

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

}  // namespace mdl::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#else  // not x86-64

namespace mdl::cpu {
void gemm_serial_bf16_dot_emulated(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*,
                                   int64_t, int64_t, float, float*, int64_t, int64_t) {}
}  // namespace mdl::cpu

#endif
