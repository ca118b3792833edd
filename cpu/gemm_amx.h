// The AMX bf16 path of gemm_f32 and gemm_bf16 (cpu/gemm_amx.cpp), for gemm.cpp: whether this CPU
// and OS can run it, and one thread's GEMM on it (same contract as gemm_f32, A and B in bf16).
#pragma once
#include <cstdint>

namespace mdl::cpu {

// AMX-BF16 and AVX512-BF16 present, and Linux granted the AMX register state (asked once).
bool amx_bf16_usable();

// Loads the tile configuration gemm_serial_amx_bf16 uses on the calling thread (once per thread):
// tiles 0-7 of 16 rows of 64 bytes. Also for other code on these tiles (cpu/roofline_loops.cpp).
void configure_amx_tiles();

// C = alpha * bf16(A) @ bf16(B) + beta * C on the calling thread; M, N, K > 0.
void gemm_serial_amx_bf16(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);

// The same from bf16 operands, given as their bits: packed without rounding.
void gemm_serial_amx_bf16_bits(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t rsa,
                               int64_t csa, const uint16_t* B, int64_t rsb, int64_t csb, float beta, float* C,
                               int64_t rsc, int64_t csc);

}  // namespace mdl::cpu
