// The bf16 pair-dot path of the GEMM (cpu/gemm_bf16_dot_impl.h, compiled in cpu/bf16_pairs_*.cpp), for gemm.cpp: one thread's GEMM
// with A and B rounded to bf16 and multiplied by VDPBF16PS (AVX512-BF16), and the same loops with
// each VDPBF16PS replaced by its arithmetic in AVX-512F, so that any AVX-512 CPU can test them.
#pragma once
#include <cstdint>

namespace mdl::cpu {

// C = alpha * bf16(A) @ bf16(B) + beta * C on the calling thread, M, N, K > 0; same contract as
// gemm_f32. Runs only on a CPU with AVX512-BF16 (has_avx512_bf16()).
void gemm_serial_bf16_dot(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);

// The same on AVX-512F alone: each pair dot is two FMAs in the order VDPBF16PS adds (the odd
// product first), so the results are the instruction's except where a product or sum is denormal.
void gemm_serial_bf16_dot_emulated(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa,
                                   int64_t csa, const float* B, int64_t rsb, int64_t csb, float beta, float* C,
                                   int64_t rsc, int64_t csc);

// The same two for operands given as bf16 bits (bf16 tensors' data), packed into pairs as they are.
void gemm_serial_bf16_dot(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t rsa, int64_t csa,
                          const uint16_t* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);
void gemm_serial_bf16_dot_emulated(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t rsa,
                                   int64_t csa, const uint16_t* B, int64_t rsb, int64_t csb, float beta, float* C,
                                   int64_t rsc, int64_t csc);

}  // namespace mdl::cpu
