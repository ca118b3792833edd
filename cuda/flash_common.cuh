// What the FlashAttention kernels (cuda/flash_attention.cu, cuda/flash_forward_mma.cuh) share: one
// call's shapes, operands and mask as the kernels see them, and the load of a (64, D) tile of q, k,
// v or dO into shared memory.
#pragma once
#include "cuda/attention_operands.cuh"
#include "cuda/common.cuh"
#include "cuda/flash_tiles.cuh"

namespace mdl::cuda::flash {

using attn::Batch;
using attn::Operand;

struct FlashArgs {
  Batch g;
  int64_t L, S, E, Ev;
  int64_t tiles;  // query tiles (forward, dq) or key tiles (dk, dv) per batch
  Operand q, k, v, mask, go;
  Operand o, dq, dk, dv;             // the outputs (out also read by the backward): unit column stride
  bool vec_q, vec_k, vec_v, vec_go;  // the operand can be read in 16-byte chunks
  const bool* mask_p;
  bool causal;
  float scale;

  // mb: the mask of this batch (null for none).
  __device__ __forceinline__ bool visible(const bool* mb, int64_t i, int64_t j) const {
    if (i >= L || j >= S || (causal && j > i)) return false;
    return !mb || mb[i * mask.rs + j * mask.cs];
  }
};

// max(a, x) where a NaN wins, as in the CPU's attention (fmaxf would drop it): a row whose scores
// hold a NaN comes out NaN, with a NaN logsumexp, rather than as a finite row.
__device__ __forceinline__ float nan_max(float a, float x) { return (x > a) | (x != x) ? x : a; }

// dst (64, D), pitch pitch<T, D>() = rows [r0, r0 + 64) of the (n, cols) matrix at src, zero past n and cols.
template <class T, int D>
__device__ void load_tile(T* dst, const T* src, const Operand& o, int64_t r0, int64_t n, int64_t cols, bool vec) {
  constexpr int P = pitch<T, D>();
  if (vec) {  // unit column stride, cols a multiple of V, 16-byte aligned rows
    constexpr int V = 16 / sizeof(T), C = D / V;
    for (int idx = threadIdx.x; idx < kTile * C; idx += kThreads) {
      const int r = idx / C, c = idx % C * V;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (r0 + r < n && c < cols) x = *reinterpret_cast<const uint4*>(src + (r0 + r) * o.rs + c);
      *reinterpret_cast<uint4*>(dst + r * P + c) = x;
    }
  } else {
    for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
      const int r = idx / D, c = idx % D;
      dst[r * P + c] = r0 + r < n && c < cols ? src[(r0 + r) * o.rs + c * o.cs] : detail::convert<T>(0.0f);
    }
  }
}

}  // namespace mdl::cuda::flash
