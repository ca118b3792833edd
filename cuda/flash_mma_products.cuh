// The warp-level tile products the register-tiled FlashAttention kernels (cuda/flash_forward_mma.cuh,
// cuda/flash_backward_mma.cuh) are made of, on mma.sync.m16n8k16 with f32 accumulators in
// registers, and the masking of a tile of scores; the operand loads are kernels/mma_fragments.h's,
// checked on the CPU. Tiles in shared memory are (64, D + 8) in T, the pitch that puts an
// ldmatrix's 8 rows on distinct banks.
#pragma once
#include "cuda/flash_common.cuh"
#include "cuda/mma_ptx.cuh"
#include "kernels/mma_fragments.h"

namespace mdl::cuda::flash {

// c[n] (16, 8n..8n+7) += A (the warp's 16 rows of a, (16, D)) B, with B[e][j] = b[j][e] (b (64, D)):
// a product of one side's rows with the other side's rows, as S = Q K^T.
template <class T, int D>
__device__ __forceinline__ void rows_times_rows_t(float (&c)[8][4], const T* a, const T* b) {
  constexpr int P = pitch<T, D>();
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t af[4];
    const mma::RowCol pa = mma::q_fragment_address(lane, kk);
    ptx::ldmatrix_x4(af, a + pa.row * P + pa.col);
#pragma unroll
    for (int nb = 0; nb < 4; ++nb) {
      uint32_t bf[4];
      const mma::RowCol pb = mma::k_fragment_address(lane, nb * 16, kk);
      ptx::ldmatrix_x4(bf, b + pb.row * P + pb.col);
      ptx::mma_16816<T>(c[2 * nb], af, bf[0], bf[1]);
      ptx::mma_16816<T>(c[2 * nb + 1], af, bf[2], bf[3]);
    }
  }
}

// c[n] (16, 8n..8n+7 of D) += A B: A (16, 64) in registers (af[kk] for columns 16kk..16kk+15), B = b
// (64, D) read through ldmatrix.trans: dv += P^T dO, dk += dS^T q, dq += dS k.
template <class T, int D>
__device__ __forceinline__ void acc_times_rows(float (&c)[D / 8][4], const uint32_t (&af)[4][4], const T* b) {
  constexpr int P = pitch<T, D>();
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int nb = 0; nb < D / 16; ++nb) {
      uint32_t bf[4];
      const mma::RowCol p = mma::v_fragment_address(lane, kk, nb * 16);
      ptx::ldmatrix_x4_trans(bf, b + p.row * P + p.col);
      ptx::mma_16816<T>(c[2 * nb], af[kk], bf[0], bf[1]);
      ptx::mma_16816<T>(c[2 * nb + 1], af[kk], bf[2], bf[3]);
    }
}

struct Identity {
  __device__ float operator()(float x, int) const { return x; }
};

// f(x, r) of x (16, 64) in accumulators (r the lane's row, 0: g, 1: g + 8), rounded to T and packed
// as the A operands of its 4 column slices. With sums, sums[r] also gains this lane's share of row
// r's sum of the rounded values.
template <class T, class F = Identity>
__device__ __forceinline__ void pack_operands(uint32_t (&af)[4][4], const float (&x)[8][4], F f = {},
                                              float* sums = nullptr) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const mma::AccumulatorPair src = mma::p_register_source(r);
      const float* c = x[2 * kk + src.ntile];
      const int row = src.pair >> 1;
      af[kk][r] = ptx::pack2<T>(f(c[src.pair], row), f(c[src.pair + 1], row));
      if (sums) {
        const float2 rounded = ptx::unpack2<T>(af[kk][r]);
        sums[row] += rounded.x + rounded.y;
      }
    }
}

struct NoStep {
  __device__ void operator()(int, int) const {}
};

// The warp's (16, 64) tile x of scores, its rows w0.. of the query tile at i0 against the key tile
// at j0: x[n][e] becomes f(x[n][e], r) (r the lane's row, 0: g, 1: g + 8), or `hidden` where the key
// is hidden from the query, and then(n, e) follows. Keys are tested only where edge says the tile
// can hide one (a mask tensor, keys past S, the causal diagonal).
template <class F, class Then = NoStep>
__device__ __forceinline__ void mask_scores(float (&x)[8][4], const FlashArgs& a, const bool* mb, int64_t i0,
                                            int64_t j0, int w0, bool edge, float hidden, F f, Then then = {}) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const mma::RowCol c = mma::c_element(lane, e);
      x[n][e] = f(x[n][e], e >> 1);
      if (edge && !a.visible(mb, i0 + w0 + c.row, j0 + n * 8 + c.col)) x[n][e] = hidden;
      then(n, e);
    }
}

}  // namespace mdl::cuda::flash
