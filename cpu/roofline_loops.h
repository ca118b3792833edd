// The loops that run at the CPU's limits, one per instruction set, for cpu/roofline_probe.cpp to
// time: chains of independent FMAs (or bf16 dot products, or AMX tile products) that keep every
// multiply-add unit busy, and the triad a[i] = b[i] + s * c[i] that keeps the memory busy. Each is
// compiled for its instruction set by attribute; the caller checks that the CPU has it.
#pragma once
#include <cstdint>

namespace mdl::cpu::detail {

// Independent accumulator chains per loop, enough to cover the FMA latency on two ports.
inline constexpr int kFmaChainsAvx2 = 12;    // of 8 floats (16 ymm registers)
inline constexpr int kFmaChainsAvx512 = 16;  // of 16 floats (32 zmm registers)
inline constexpr int kBf16ChainsAvx512 = 16;

// FLOPs of one round of each loop (a multiply-add counts as two).
inline constexpr double kFmaRoundFlopsAvx2 = 2.0 * 8 * kFmaChainsAvx2;
inline constexpr double kFmaRoundFlopsAvx512 = 2.0 * 16 * kFmaChainsAvx512;
inline constexpr double kBf16RoundFlopsAvx512 = 2.0 * 32 * kBf16ChainsAvx512;  // vdpbf16ps: 16 lanes x 2 pairs
inline constexpr double kAmxRoundFlops = 4 * 2.0 * 16 * 16 * 32;               // four tdpbf16ps of 16x16x32

// `rounds` rounds of the chains; the result depends on every chain, so none is optimised away.
float fma_chains_avx2(int64_t rounds);
float fma_chains_avx512(int64_t rounds);
float bf16_dot_chains_avx512(int64_t rounds);
float amx_bf16_tile_products(int64_t rounds);  // the AMX state granted and tiles configured first

// a[i] = b[i] + s * c[i] for i in [0, n), `passes` times over the same arrays.
void triad_avx512(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes);
void triad_avx2(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes);
void triad_plain(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes);

}  // namespace mdl::cpu::detail
