// The warp-level tile products of the f32 FlashAttention kernels on tensor cores
// (cuda/flash_forward_tf32.cuh, cuda/flash_backward_tf32.cuh, the flash_attention_tf32x3 switch):
// mma.sync.m16n8k8 on tf32 with the 3xTF32 split, which keeps close to f32 accuracy. Each f32
// operand x becomes big = tf32(x) and small = tf32(x - big); a product is
//   big * big + big * small + small * big
// (small * small, 2^-22 of the product, is dropped), the two small terms added to the accumulator
// first. Operands come from shared memory by plain 32-bit loads (ldmatrix moves 16-bit elements) or
// straight from a product's accumulators; the maps are kernels/mma_fragments_tf32.h, checked on the
// CPU. Tiles in shared memory are (64, D + 4) f32: with a pitch of 4 banks mod 32, the A and K-side B
// loads (lane (g, t) at row g, col t) and the V-side B loads (row 2t + h, col g) each touch 32
// distinct banks.
#pragma once
#include "cuda/flash_common.cuh"
#include "cuda/mma_ptx.cuh"
#include "kernels/mma_fragments_tf32.h"

namespace mdl::cuda::flash {

// x as two tf32 operands, x ~ big + small to about 22 bits.
struct Tf32Pair {
  uint32_t big, small;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const uint32_t big = ptx::to_tf32(x);
  return {big, ptx::to_tf32(x - __uint_as_float(big))};
}

// c (16 x 8) += a b in 3xTF32.
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const uint32_t (&a_big)[4], const uint32_t (&a_small)[4],
                                           const Tf32Pair (&b)[2]) {
  ptx::mma_1688_tf32(c, a_small, b[0].big, b[1].big);
  ptx::mma_1688_tf32(c, a_big, b[0].small, b[1].small);
  ptx::mma_1688_tf32(c, a_big, b[0].big, b[1].big);
}

// c[n] (16, 8n..8n+7) += A B: A the warp's 16 rows of a ((16, D) at a), B[e][j] = b[j][e] (b (64, D)):
// S = Q K^T, and in the backward S^T = K Q^T, dP = dO V^T, dP^T = V dO^T. A is loaded per k-step, not
// held: at D = 128 its big and small halves would take 128 registers.
template <int D>
__device__ __forceinline__ void rows_times_rows_t_3xtf32(float (&c)[8][4], const float* a, const float* b) {
  constexpr int P = pitch<float, D>();
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < D / 8; ++kk) {
    uint32_t a_big[4], a_small[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const mma::RowCol e = mma::tf32::rows_a_element(lane, kk, i);
      const Tf32Pair x = split_tf32(a[e.row * P + e.col]);
      a_big[i] = x.big, a_small[i] = x.small;
    }
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      Tf32Pair bf[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const mma::RowCol e = mma::tf32::rows_t_b_element(lane, n * 8, kk, i);
        bf[i] = split_tf32(b[e.row * P + e.col]);
      }
      mma_3xtf32(c[n], a_big, a_small, bf);
    }
  }
}

// c[n] (16, 8n..8n+7 of D) += X B: X (16, 64) in accumulators (x[kk] for columns 8kk..8kk+7), B = b
// (64, D) with its rows read in the accumulators' column order: O += P V, and in the backward
// dv += P^T dO, dk += dS^T q, dq += dS k.
template <int D>
__device__ __forceinline__ void acc_times_rows_3xtf32(float (&c)[D / 8][4], const float (&x)[8][4], const float* b) {
  constexpr int P = pitch<float, D>();
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    uint32_t a_big[4], a_small[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const Tf32Pair p = split_tf32(x[kk][mma::tf32::acc_of_a(i)]);
      a_big[i] = p.big, a_small[i] = p.small;
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      Tf32Pair bf[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const mma::RowCol e = mma::tf32::rows_b_element(lane, kk * 8, n * 8, i);
        bf[i] = split_tf32(b[e.row * P + e.col]);
      }
      mma_3xtf32(c[n], a_big, a_small, bf);
    }
  }
}

}  // namespace mdl::cuda::flash
