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

// C (bf16 bits, M x N, rows rsc apart) = bf16(A @ B + bias[j]) for bf16 A and B (bits), on the calling
// thread, M, N > 0, 0 < K <= kPairsKC: the sums in f32, the bias (may be null) added and each rounded
// once in the micro-kernel's registers, the bits of gemm_serial_bf16_dot into f32 then those two steps.
constexpr int64_t kPairsKC = 384;  // the pair kernel's K step (gemm_bf16_dot_impl.h's KC)
void gemm_serial_bf16_dot_to_bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa,
                                  const uint16_t* B, int64_t rsb, int64_t csb, const float* bias, uint16_t* C,
                                  int64_t rsc);
void gemm_serial_bf16_dot_to_bf16_emulated(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa,
                                           const uint16_t* B, int64_t rsb, int64_t csb, const float* bias, uint16_t* C,
                                           int64_t rsc);

// Operands packed once on pairs (gemm.h's PackedA and PackedB packed for bf16 products; the layout:
// cpu/gemm_bf16_dot_packed_impl.h). The packing is the same for both kernels; each product has the
// bits gemm_serial_bf16_dot (or _emulated) gives for the same sub-matrices.
void pack_a_pairs(int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa, uint32_t* buf);
void pack_b_pairs(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, uint32_t* buf);
// C (m x n) = alpha * packed A (M x K)[:m, :k] @ panel (k x n, n <= 32, rows 32 floats apart) + beta * C
void times_panel_pairs(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                       const float* panel, float beta, float* C, int64_t rsc, int64_t csc);
void times_panel_pairs_emulated(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* panel, float beta, float* C, int64_t rsc, int64_t csc);
// C (M x n) = alpha * A (M x k) @ packed B (K x N)[:k, :n] + beta * C
void times_pairs_b(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                   const float* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc);
void times_pairs_b_emulated(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                            const float* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc);
// The same three for operands given as bf16 bits (bf16 tensors' data), paired as they are.
void pack_a_pairs(int64_t M, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa, uint32_t* buf);
void times_panel_pairs(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                       const uint16_t* panel, float beta, float* C, int64_t rsc, int64_t csc);
void times_panel_pairs_emulated(const uint32_t* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k,
                                float alpha, const uint16_t* panel, float beta, float* C, int64_t rsc, int64_t csc);
void times_pairs_b(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                   const uint16_t* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc);
void times_pairs_b_emulated(const uint32_t* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                            const uint16_t* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc,
                            int64_t csc);

}  // namespace mdl::cpu
