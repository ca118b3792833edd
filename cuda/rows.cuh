// Row geometry and block reductions for the kernels that work one row at a time (softmax, norms,
// losses): Rows maps row m and position k along the row to element offsets for up to NT operands
// of one shape, and block_sum/block_max reduce across a block in a fixed order.
#pragma once
#include "cuda/common.cuh"

namespace mdl::cuda::detail {

constexpr int kRowBlock = 256;

template <int NT>
struct Rows {
  int nk = 0;
  int64_t ksize[kMaxDimsCuda], kstride[NT][kMaxDimsCuda];
  int64_t n = 1, rstride[NT] = {}, M = 1;

  __device__ __forceinline__ void row(int64_t m, int64_t (&off)[NT]) const {
#pragma unroll
    for (int t = 0; t < NT; ++t) off[t] = 0;
    for (int d = nk - 1; d >= 0; --d) {
      const int64_t q = m / ksize[d], r = m - q * ksize[d];
      m = q;
#pragma unroll
      for (int t = 0; t < NT; ++t) off[t] += r * kstride[t][d];
    }
  }
};

// Rows along `dim` of tensors that share ts[0]'s shape.
template <int NT>
Rows<NT> make_rows(const char* op, const std::array<const Tensor*, NT>& ts, int64_t dim) {
  Rows<NT> g;
  const Tensor& x = *ts[0];
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim) {
      g.n = x.size(d);
      for (int t = 0; t < NT; ++t) g.rstride[t] = ts[size_t(t)]->stride(d);
      continue;
    }
    if (x.size(d) == 1) continue;
    MDL_CHECK(g.nk < kMaxDimsCuda, op, ": CUDA kernels take at most ", kMaxDimsCuda, " dims, got shape ",
              shape_str(x.shape()));
    g.ksize[g.nk] = x.size(d);
    for (int t = 0; t < NT; ++t) g.kstride[t][g.nk] = ts[size_t(t)]->stride(d);
    ++g.nk;
    g.M *= x.size(d);
  }
  return g;
}

// Fixed-order tree reductions over the block (blockDim.x == kRowBlock); every thread gets the result.
template <class A, class F>
__device__ A block_reduce(A v, F f) {
  __shared__ A buf[kRowBlock];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int w = kRowBlock / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) buf[threadIdx.x] = f(buf[threadIdx.x], buf[threadIdx.x + w]);
    __syncthreads();
  }
  const A r = buf[0];
  __syncthreads();
  return r;
}
template <class A>
__device__ A block_sum(A v) {
  return block_reduce(v, [](A a, A b) { return a + b; });
}
template <class A>
__device__ A block_max(A v) {  // NaN wins
  return block_reduce(v, [](A a, A b) { return (b > a || b != b) && a == a ? b : a; });
}

}  // namespace mdl::cuda::detail
