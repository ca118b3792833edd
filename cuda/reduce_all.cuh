// A whole-tensor f64 sum of squares for contiguous data, left on the device: one partial per block
// (fixed-order tree), then one block sums the partials in a fixed order. Deterministic for a given
// size, and no host sync (clip_grad_norm_ inside a captured step).
#pragma once
#include <algorithm>

#include "cuda/rows.cuh"

namespace mdl::cuda::detail {

template <class T>
__global__ void sum_squares_kernel(const T* x, int64_t n, double* partial) {
  double a = 0;
  for (int64_t i = blockIdx.x * int64_t(kRowBlock) + threadIdx.x; i < n; i += int64_t(gridDim.x) * kRowBlock) {
    const double v = double(to_acc(x[i]));
    a += v * v;
  }
  a = block_sum(a);
  if (threadIdx.x == 0) partial[blockIdx.x] = a;
}

// One block: out = the sum of partial (n).
template <class Unused = void>
__global__ void sum_partials_kernel(const double* partial, int n, double* out) {
  double a = 0;
  for (int i = int(threadIdx.x); i < n; i += kRowBlock) a += partial[i];
  a = block_sum(a);
  if (threadIdx.x == 0) *out = a;
}

// *out (device) = the sum of x[i]^2 over x (n, device).
template <class T>
void sum_of_squares(const T* x, int64_t n, double* out) {
  const unsigned blocks = unsigned(std::clamp<int64_t>((n + kRowBlock - 1) / kRowBlock, 1, 1024));
  Tensor part = make_tensor({int64_t(blocks)}, kF64, Device::cuda(0));
  sum_squares_kernel<T><<<blocks, kRowBlock, 0, stream()>>>(x, n, ptr<double>(part));
  CUDA_CHECK_LAUNCH("sum_squares");
  sum_partials_kernel<><<<1, kRowBlock, 0, stream()>>>(ptr<const double>(part), int(blocks), out);
  CUDA_CHECK_LAUNCH("sum_squares");
}

}  // namespace mdl::cuda::detail
