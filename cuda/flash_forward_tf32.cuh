// FlashAttention-2's forward for f32 on tensor cores (the flash_attention_tf32x3 switch): the
// register-tiled design of cuda/flash_forward_mma.cuh on mma.sync.m16n8k8 with 3xTF32 products
// (cuda/flash_tf32_products.cuh), and the contract of the FMA kernel in cuda/flash_attention.cu
// (same tiles, block order, output and logsumexp; a row that sees no key gives zeros, lse = +inf).
//
// A block of 4 warps takes 64 query rows, 16 per warp. For each tile of 64 keys:
//   S (16, 64) = Q K^T      Q and K fragments by 32-bit loads from shared memory, split per k-step
//   mask                    only on tiles that need it: the causal diagonal, the last key tile, a mask
//   online softmax          each lane holds two rows' values; row max and sum over the 4 lanes of a
//                           quad by shuffles; exp2 with scale * log2(e) folded into S
//   O (16, D) += P V        P in f32 straight from S's accumulators as the A operand, V's rows read in
//                           the accumulators' column order
// K and V tiles stream through two shared-memory stages filled by cp.async, so the next tile's copy
// overlaps this tile's products. Every sum runs in a fixed order: results repeat bit for bit.
#pragma once
#include "cuda/flash_common.cuh"
#include "cuda/flash_forward_mma.cuh"
#include "cuda/flash_mma_products.cuh"
#include "cuda/flash_tf32_products.cuh"
#include "kernels/attention_tiles.h"
#include "kernels/mma_fragments_tf32.h"

namespace mdl::cuda::flash {

// The q tile and two stages of k and v tiles, (64, D + 4) f32 each: 165 KiB at D = 128.
template <int D>
constexpr size_t forward_tf32_smem() {
  return 5 * size_t(kTile) * pitch<float, D>() * sizeof(float);
}

// One block per (batch, tile of 64 query rows). Lane (g, t) = (lane / 4, lane % 4) of a warp holds
// rows g and g + 8 of the warp's 16: S's columns 8n + 2t, +1 for n < 8, O's 8n + 2t, +1 for n < D/8.
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_tf32_kernel(FlashArgs a, float* out, float* lse, const float* q, const float* k, const float* v) {
  constexpr int P = pitch<float, D>();
  constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
  extern __shared__ __align__(128) unsigned char smem[];
  float* sq = reinterpret_cast<float*>(smem);
  float* sk = sq + kTile * P;      // two stages
  float* sv = sk + 2 * kTile * P;  // two stages
  const AttentionTile at = attention_tile(blockIdx.x, a.g.count, a.tiles, a.causal, AttentionTiles::Query);
  const int64_t b = at.batch, i0 = at.tile * kTile;
  const int lane = threadIdx.x % 32, w0 = threadIdx.x / 32 * 16;
  const int g = mma::group_of(lane), tg = mma::thread_in_group(lane);
  const float* kb = k + a.k.base(a.g, b);
  const float* vb = v + a.v.base(a.g, b);
  const bool* mb = a.mask_p ? a.mask_p + a.mask.base(a.g, b) : nullptr;
  const int64_t kend = a.causal ? min(a.S, i0 + kTile) : a.S;  // causal: later keys are hidden from the whole tile
  const int64_t ntiles = (kend + kTile - 1) / kTile;

  load_tile_async<float, D>(sq, q + a.q.base(a.g, b), a.q, i0, a.L, a.E, a.vec_q);
  if (ntiles > 0) {
    load_tile_async<float, D>(sk, kb, a.k, 0, a.S, a.E, a.vec_k);
    load_tile_async<float, D>(sv, vb, a.v, 0, a.S, a.Ev, a.vec_v);
  }
  ptx::cp_async_commit();

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // Rows g and g + 8: the running max of S * scale * log2(e), and this lane's share of the row sum.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float scale = a.scale * kLog2e;

  for (int64_t t = 0; t < ntiles; ++t) {
    const int64_t j0 = t * kTile;
    const float* ks = sk + (t & 1) * kTile * P;
    const float* vs = sv + (t & 1) * kTile * P;
    if (t + 1 < ntiles) {  // the next tile's copy overlaps this tile's products
      load_tile_async<float, D>(sk + ((t + 1) & 1) * kTile * P, kb, a.k, j0 + kTile, a.S, a.E, a.vec_k);
      load_tile_async<float, D>(sv + ((t + 1) & 1) * kTile * P, vb, a.v, j0 + kTile, a.S, a.Ev, a.vec_v);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // every group but the one just committed: tile t (and q) has landed
    __syncthreads();

    // s (16, 64) = Q (16, D) K^T (D, 64): s[n] holds keys 8n..8n+7
    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    rows_times_rows_t_3xtf32<D>(s, sq + w0 * P, ks);

    // Scale to log2 units; mask where a key can be hidden: a mask tensor, keys past S, the causal diagonal.
    const bool edge = mb || j0 + kTile > a.S || (a.causal && j0 + kTile > i0);
    mask_scores(s, a, mb, i0, j0, w0, edge, -INFINITY, [&](float x, int) { return x * scale; });

    // Online softmax: the row max over the quad; O and l scale by alpha = 2^(m_old - m_new). A row
    // with no visible key yet keeps m = -inf and takes base 0, so its P (and alpha) are 0, not NaN.
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) mx[e >> 1] = nan_max(mx[e >> 1], s[n][e]);
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = nan_max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = nan_max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
      alpha[r] = exp2f(m[r] - base[r]);
      m[r] = mx[r];
    }
    // P = 2^(s - base) in place, in f32 as the FMA kernel keeps it; l sums it.
    float rowsum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = exp2f(s[n][e] - base[e >> 1]);
        rowsum[e >> 1] += s[n][e];
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + rowsum[r];
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0], o[n][1] *= alpha[0];
      o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }

    acc_times_rows_3xtf32<D>(o, s, vs);  // o (16, D) += P (16, 64) V (64, D)
    __syncthreads();                     // this stage is refilled by tile t + 2's copy
  }
  ptx::cp_async_wait<0>();  // with no key tile at all, q's copy is still in flight

  // out = O / l, the row sum completed over the quad; a row that sees no key: zeros, lse = +inf.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = i0 + w0 + g + 8 * r;
    if (i >= a.L) continue;
    const bool none = m[r] == -INFINITY;
    const float inv = none ? 0.0f : 1.0f / l[r];
    float* row = out + a.o.base(a.g, b) + i * a.o.rs;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = n * 8 + tg * 2 + h;
        if (e < a.Ev) row[e] = o[n][2 * r + h] * inv;
      }
    if (tg == 0) lse[b * a.L + i] = none ? INFINITY : m[r] * kLn2 + logf(l[r]);
  }
}

}  // namespace mdl::cuda::flash
