// The tiles of the flash attention kernels (cuda/flash_attention.cu) and the warp-level products
// over them: on tensor cores (WMMA 16x16x16, f32 accumulators) for f16/bf16, with FMAs in f32 for
// f32, which stays exact. Both keep a warp's 16 x 16 f32 accumulator tiles in registers: WMMA's
// fragment, or SimtAcc, where lane l holds row l / 2, columns (l % 2) * 8 to + 8.
#pragma once
#include <mma.h>

#include <type_traits>

namespace mdl::cuda::flash {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;  // query rows per tile and keys per tile
constexpr int kWarps = 4;  // each owns 16 rows of a tile
constexpr int kThreads = kWarps * 32;
constexpr int kPS = kTile + 4;  // row pitch (floats) of a tile of scores
constexpr int kPP = kTile + 8;  // row pitch (elements) of a tile of P or dS in the input type

// Row pitch (elements) of a (64, D) tile of q, k, v or dO. For 16-bit types 8 more than D keeps
// every 16x16 fragment 32-byte aligned and spreads a fragment's rows over the shared-memory banks;
// for f32, 4 more puts the rows that the 8 lanes of a 16-byte load phase read on distinct banks.
template <class T, int D>
constexpr int pitch() {
  return std::is_same_v<T, float> ? D + 4 : D + 8;
}

using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
template <class T, class Layout>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, Layout>;
template <class T, class Layout>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, Layout>;

struct SimtAcc {
  float x[8];
};

// A warp's 16 x 16 accumulator tile for input type T.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, float>, SimtAcc, FragC>;

__device__ __forceinline__ void fill(FragC& c, float v) { wmma::fill_fragment(c, v); }
__device__ __forceinline__ void load_acc(FragC& c, const float* p, int ld) {
  wmma::load_matrix_sync(c, p, ld, wmma::mem_row_major);
}
__device__ __forceinline__ void store_acc(float* p, const FragC& c, int ld) {
  wmma::store_matrix_sync(p, c, ld, wmma::mem_row_major);
}

__device__ __forceinline__ void fill(SimtAcc& c, float v) {
#pragma unroll
  for (int i = 0; i < 8; ++i) c.x[i] = v;
}
__device__ __forceinline__ void load_acc(SimtAcc& c, const float* p, int ld) {
  const int lane = threadIdx.x % 32;
  const float* r = p + lane / 2 * ld + lane % 2 * 8;
#pragma unroll
  for (int i = 0; i < 8; ++i) c.x[i] = r[i];
}
__device__ __forceinline__ void store_acc(float* p, const SimtAcc& c, int ld) {
  const int lane = threadIdx.x % 32;
  float* r = p + lane / 2 * ld + lane % 2 * 8;
#pragma unroll
  for (int i = 0; i < 8; ++i) r[i] = c.x[i];
}

// c (16, 64) = a (16, D) @ b^T (D, 64), b stored (64, D): scores q k^T, or dO v^T. The f32 path:
// lane l sums rows 4 * (l / 8) to + 4 against keys l % 8 + 8 j (j < 8), four columns of D per
// 16-byte load (pitches are multiples of 4 floats).
template <class T, int D>
__device__ void mma_abt(float* c, int ldc, const T* a, int lda, const T* b, int ldb) {
  if constexpr (std::is_same_v<T, float>) {
    const int lane = threadIdx.x % 32, r0 = lane / 8 * 4, c0 = lane % 8;
    float acc[4][8] = {};
#pragma unroll 2
    for (int e = 0; e < D; e += 4) {
      float4 av[4], bv[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = *reinterpret_cast<const float4*>(a + (r0 + i) * lda + e);
#pragma unroll
      for (int j = 0; j < 8; ++j) bv[j] = *reinterpret_cast<const float4*>(b + (c0 + 8 * j) * ldb + e);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          acc[i][j] = fmaf(av[i].w, bv[j].w,
                           fmaf(av[i].z, bv[j].z, fmaf(av[i].y, bv[j].y, fmaf(av[i].x, bv[j].x, acc[i][j]))));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) c[(r0 + i) * ldc + c0 + 8 * j] = acc[i][j];
  } else {
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        FragA<T, wmma::row_major> fa;
        FragB<T, wmma::col_major> fb;  // element (e, j) at b[j * ldb + e]
        wmma::load_matrix_sync(fa, a + kk * 16, lda);
        wmma::load_matrix_sync(fb, b + n * 16 * ldb + kk * 16, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(c + n * 16, acc, ldc, wmma::mem_row_major);
    }
  }
}

// c (16, D) += a (16, 64) @ b (64, D). With LayoutA row_major, element (m, k) of a is at
// a[m * lda + k]: O += P v, dq += dS k. With col_major it is at a[k * lda + m], a (64, 16) tile
// read as its transpose: dv += P^T dO, dk += dS^T q.
template <class T, int D, class LayoutA = wmma::row_major>
__device__ void mma_ab(Acc<T> (&c)[D / 16], const T* a, int lda, const T* b, int ldb) {
  constexpr bool col_major = std::is_same_v<LayoutA, wmma::col_major>;
  if constexpr (std::is_same_v<T, float>) {
    const int lane = threadIdx.x % 32, m = lane / 2, c0 = lane % 2 * 8;
#pragma unroll 2
    for (int k = 0; k < kTile; k += 4) {
      float av[4];
      if constexpr (col_major) {
#pragma unroll
        for (int t = 0; t < 4; ++t) av[t] = a[(k + t) * lda + m];
      } else {
        const float4 v = *reinterpret_cast<const float4*>(a + m * lda + k);
        av[0] = v.x, av[1] = v.y, av[2] = v.z, av[3] = v.w;
      }
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int n = 0; n < D / 16; ++n) {
          const float* br = b + (k + t) * ldb + n * 16 + c0;
          const float4 b0 = *reinterpret_cast<const float4*>(br), b1 = *reinterpret_cast<const float4*>(br + 4);
          float* x = c[n].x;
          x[0] = fmaf(av[t], b0.x, x[0]), x[1] = fmaf(av[t], b0.y, x[1]);
          x[2] = fmaf(av[t], b0.z, x[2]), x[3] = fmaf(av[t], b0.w, x[3]);
          x[4] = fmaf(av[t], b1.x, x[4]), x[5] = fmaf(av[t], b1.y, x[5]);
          x[6] = fmaf(av[t], b1.z, x[6]), x[7] = fmaf(av[t], b1.w, x[7]);
        }
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      FragA<T, LayoutA> fa;
      wmma::load_matrix_sync(fa, a + kk * 16 * (col_major ? lda : 1), lda);
#pragma unroll
      for (int n = 0; n < D / 16; ++n) {
        FragB<T, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, b + kk * 16 * ldb + n * 16, ldb);
        wmma::mma_sync(c[n], fa, fb, c[n]);
      }
    }
  }
}

}  // namespace mdl::cuda::flash
