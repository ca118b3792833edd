// FlashAttention-2's backward for f32 on tensor cores (the flash_attention_tf32x3 switch): the
// register-tiled kernels of cuda/flash_backward_mma.cuh (the same work split, block order and stages,
// every sum in a fixed order, so results are deterministic) with 3xTF32 products
// (cuda/flash_tf32_products.cuh) in place of f16/bf16 ones, and the contract of the FMA kernels in
// cuda/flash_attention.cu. A warp owns 16 rows of its block's tile and computes, per tile of the
// other side:
//
//   dk, dv kernel (rows: keys)            dq kernel (rows: queries)
//   S^T  (16, 64) = K Q^T                 S  (16, 64) = Q K^T
//   dP^T (16, 64) = V dO^T                dP (16, 64) = dO V^T
//   P^T = 2^(S^T s - lse), dS^T = P^T (dP^T - D)          P, dS likewise, row by row
//   dv (16, Ev) += P^T dO                 dq (16, E) += dS K
//   dk (16, E)  += dS^T Q
//
// with s = scale * log2(e) and lse, D = rowsum(dO * O) of each query. P^T and dS^T stay in f32 and go
// from the accumulators straight into the A operand of the next product, the B side's rows read in
// the accumulators' column order (kernels/mma_fragments_tf32.h).
#pragma once
#include "cuda/flash_backward_mma.cuh"
#include "cuda/flash_common.cuh"
#include "cuda/flash_forward_mma.cuh"
#include "cuda/flash_mma_products.cuh"
#include "cuda/flash_tf32_products.cuh"
#include "kernels/attention_tiles.h"
#include "kernels/mma_fragments_tf32.h"

namespace mdl::cuda::flash::tf32_backward {

using mma_backward::kLog2e;
using mma_backward::store_acc_rows;
using mma_backward::zero;
using mma_backward::zero_rows;

// Two tiles held for the whole block and two stages of two streamed tiles, (64, D + 4) f32 each, and
// two stages of the streamed queries' lse and D (the dk/dv kernel): 199 KiB at D = 128.
template <int D>
constexpr size_t smem_bytes() {
  return 6 * size_t(kTile) * pitch<float, D>() * sizeof(float) + 2 * 2 * size_t(kTile) * sizeof(float);
}

// One block per (batch, tile of 64 keys); warp w owns keys 16w..16w+15 and their dk, dv.
template <int D>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(FlashArgs a, float* dk, float* dv, const float* lse, const float* delta, const float* q, const float* k,
                const float* v, const float* go) {
  constexpr int P = pitch<float, D>(), TILE = kTile * P;
  extern __shared__ __align__(128) unsigned char smem[];
  float* sk = reinterpret_cast<float*>(smem);
  float* sv = sk + TILE;
  float* sq = sv + TILE;             // two stages
  float* sdo = sq + 2 * TILE;        // two stages
  float* slse = sdo + 2 * TILE;      // two stages, log2 units
  float* sdelta = slse + 2 * kTile;  // two stages
  const AttentionTile at = attention_tile(blockIdx.x, a.g.count, a.tiles, a.causal, AttentionTiles::Key);
  const int64_t b = at.batch, j0 = at.tile * kTile;
  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16;
  const float* qb = q + a.q.base(a.g, b);
  const float* gb = go + a.go.base(a.g, b);
  const bool* mb = a.mask_p ? a.mask_p + a.mask.base(a.g, b) : nullptr;
  const int64_t first = a.causal ? j0 / kTile : 0;  // causal: query tiles before j0 see none of these keys
  const int64_t last = (a.L + kTile - 1) / kTile;
  // Stage s of query tile i0: q, dO, and its rows' lse (+inf past L, so P = 0 there) and D.
  auto fetch = [&](int64_t i0, int s) {
    load_tile_async<float, D>(sq + s * TILE, qb, a.q, i0, a.L, a.E, a.vec_q);
    load_tile_async<float, D>(sdo + s * TILE, gb, a.go, i0, a.L, a.Ev, a.vec_go);
    if (threadIdx.x < kTile) {
      const int64_t i = i0 + threadIdx.x;
      slse[s * kTile + threadIdx.x] = i < a.L ? lse[b * a.L + i] * kLog2e : INFINITY;
      sdelta[s * kTile + threadIdx.x] = i < a.L ? delta[b * a.L + i] : 0.0f;
    }
  };
  load_tile_async<float, D>(sk, k + a.k.base(a.g, b), a.k, j0, a.S, a.E, a.vec_k);
  load_tile_async<float, D>(sv, v + a.v.base(a.g, b), a.v, j0, a.S, a.Ev, a.vec_v);
  if (first < last) fetch(first * kTile, 0);
  ptx::cp_async_commit();
  float dkf[D / 8][4], dvf[D / 8][4];
  zero_rows(dkf), zero_rows(dvf);
  const float scale = a.scale * kLog2e;
  for (int64_t it = first; it < last; ++it) {
    const int s = int(it - first) & 1;
    const int64_t i0 = it * kTile;
    if (it + 1 < last) fetch(i0 + kTile, s ^ 1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();
    const float* q_s = sq + s * TILE;
    const float* do_s = sdo + s * TILE;
    const float* lse_s = slse + s * kTile;
    const float* delta_s = sdelta + s * kTile;
    // P^T (16, 64) = 2^(S^T s - lse), S^T = K Q^T: keys w0.. of this warp against the tile's 64 queries
    float pt[8][4];
    zero(pt);
    rows_times_rows_t_3xtf32<D>(pt, sk + w0 * P, q_s);
    const bool edge = mb || j0 + kTile > a.S || (a.causal && i0 < j0 + kTile);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const mma::RowCol c = mma::c_element(lane, e);
        const int qc = n * 8 + c.col;
        const float p = exp2f(pt[n][e] * scale - lse_s[qc]);  // 0 where lse = +inf
        pt[n][e] = edge && !a.visible(mb, i0 + qc, j0 + w0 + c.row) ? 0.0f : p;
      }
    acc_times_rows_3xtf32<D>(dvf, pt, do_s);  // dv (16, Ev) += P^T (16, 64) dO (64, Ev)
    // dS^T = P^T (dP^T - D), dP^T = V dO^T
    float dst[8][4];
    zero(dst);
    rows_times_rows_t_3xtf32<D>(dst, sv + w0 * P, do_s);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dst[n][e] = pt[n][e] * (dst[n][e] - delta_s[n * 8 + mma::c_element(lane, e).col]);
    acc_times_rows_3xtf32<D>(dkf, dst, q_s);  // dk (16, E) += dS^T (16, 64) q (64, E)
    __syncthreads();                          // this stage is refilled two tiles on
  }
  ptx::cp_async_wait<0>();  // with no query tile at all, k's and v's copies are still in flight
  if (dv) store_acc_rows<float, D>(dv + a.dv.base(a.g, b), a.dv.rs, dvf, j0 + w0, a.S, a.Ev, 1.0f);
  if (dk) store_acc_rows<float, D>(dk + a.dk.base(a.g, b), a.dk.rs, dkf, j0 + w0, a.S, a.E, a.scale);
}

// One block per (batch, tile of 64 query rows); warp w owns rows 16w..16w+15 and their dq.
template <int D>
__global__ void __launch_bounds__(kThreads) dq_kernel(FlashArgs a, float* dq, const float* lse, const float* delta,
                                                      const float* q, const float* k, const float* v, const float* go) {
  constexpr int P = pitch<float, D>(), TILE = kTile * P;
  extern __shared__ __align__(128) unsigned char smem[];
  float* sq = reinterpret_cast<float*>(smem);
  float* sdo = sq + TILE;
  float* sk = sdo + TILE;     // two stages
  float* sv = sk + 2 * TILE;  // two stages
  const AttentionTile at = attention_tile(blockIdx.x, a.g.count, a.tiles, a.causal, AttentionTiles::Query);
  const int64_t b = at.batch, i0 = at.tile * kTile;
  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16, g = mma::group_of(lane);
  const float* kb = k + a.k.base(a.g, b);
  const float* vb = v + a.v.base(a.g, b);
  const bool* mb = a.mask_p ? a.mask_p + a.mask.base(a.g, b) : nullptr;
  const int64_t kend = a.causal ? min(a.S, i0 + kTile) : a.S;
  const int64_t ntiles = (kend + kTile - 1) / kTile;
  load_tile_async<float, D>(sq, q + a.q.base(a.g, b), a.q, i0, a.L, a.E, a.vec_q);
  load_tile_async<float, D>(sdo, go + a.go.base(a.g, b), a.go, i0, a.L, a.Ev, a.vec_go);
  if (ntiles > 0) {
    load_tile_async<float, D>(sk, kb, a.k, 0, a.S, a.E, a.vec_k);
    load_tile_async<float, D>(sv, vb, a.v, 0, a.S, a.Ev, a.vec_v);
  }
  ptx::cp_async_commit();
  // This lane's rows g and g + 8: lse in log2 units (+inf past L) and D.
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = i0 + w0 + g + 8 * r;
    row_lse[r] = i < a.L ? lse[b * a.L + i] * kLog2e : INFINITY;
    row_delta[r] = i < a.L ? delta[b * a.L + i] : 0.0f;
  }
  float dqf[D / 8][4];
  zero_rows(dqf);
  const float scale = a.scale * kLog2e;
  for (int64_t t = 0; t < ntiles; ++t) {
    const int64_t j0 = t * kTile;
    const int s = int(t & 1);
    if (t + 1 < ntiles) {
      load_tile_async<float, D>(sk + (s ^ 1) * TILE, kb, a.k, j0 + kTile, a.S, a.E, a.vec_k);
      load_tile_async<float, D>(sv + (s ^ 1) * TILE, vb, a.v, j0 + kTile, a.S, a.Ev, a.vec_v);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();
    const float* k_s = sk + s * TILE;
    float sc[8][4], dp[8][4];
    zero(sc), zero(dp);
    rows_times_rows_t_3xtf32<D>(sc, sq + w0 * P, k_s);             // S (16, 64) = q k^T
    rows_times_rows_t_3xtf32<D>(dp, sdo + w0 * P, sv + s * TILE);  // dP (16, 64) = dO v^T
    const bool edge = mb || j0 + kTile > a.S || (a.causal && j0 + kTile > i0);
    // sc becomes P, 0 for a hidden key, and dp becomes dS = P (dP - D)
    mask_scores(
        sc, a, mb, i0, j0, w0, edge, 0.0f, [&](float x, int r) { return exp2f(x * scale - row_lse[r]); },
        [&](int n, int e) { dp[n][e] = sc[n][e] * (dp[n][e] - row_delta[e >> 1]); });
    acc_times_rows_3xtf32<D>(dqf, dp, k_s);  // dq (16, E) += dS (16, 64) k (64, E)
    __syncthreads();
  }
  ptx::cp_async_wait<0>();  // with no key tile at all, q's and dO's copies are still in flight
  store_acc_rows<float, D>(dq + a.dq.base(a.g, b), a.dq.rs, dqf, i0 + w0, a.L, a.E, a.scale);
}

}  // namespace mdl::cuda::flash::tf32_backward
