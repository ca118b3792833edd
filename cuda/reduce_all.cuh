// A whole-tensor f64 sum of squares for contiguous data: one partial per block (fixed-order tree),
// the partials summed in order on the host. Deterministic for a given size.
#pragma once
#include <vector>

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

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  const unsigned blocks = unsigned(std::min<int64_t>((n + kRowBlock - 1) / kRowBlock, 1024));
  Tensor part = make_tensor({int64_t(blocks)}, kF64, Device::cuda(0));
  sum_squares_kernel<T><<<blocks, kRowBlock, 0, stream()>>>(x, n, ptr<double>(part));
  CUDA_CHECK_LAUNCH("sum_squares");
  std::vector<double> host(blocks);
  CUDA_CHECK("sum_squares",
             cudaMemcpyAsync(host.data(), part.raw_data(), blocks * sizeof(double), cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK("sum_squares", cudaStreamSynchronize(stream()));
  double s = 0;
  for (double v : host) s += v;
  return s;
}

}  // namespace mdl::cuda::detail
