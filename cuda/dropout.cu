// Dropout on the GPU with the CPU's counter-based Philox 4x32-10 (kernels/philox.h): element i
// is kept when word i % 4 of philox(seed, offset + i / 4) >= p * 2^32, so a mask depends on
// (seed, offset) only and equals the CPU's bit for bit. masked_scale applies it.
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "kernels/philox.h"

namespace mdl::cuda {

using namespace detail;

namespace {

__global__ void dropout_mask_kernel(bool* mask, int64_t n, double threshold, uint64_t seed, uint64_t offset) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const PhiloxWords r = philox4x32_10(seed, offset + uint64_t(b));
    for (int j = 0; j < 4 && b * 4 + j < n; ++j) mask[b * 4 + j] = double(r.w[j]) >= threshold;
  }
}

template <class T>
struct MaskScale {
  acc_t<T> s;
  __device__ T operator()(T x, bool keep) const { return convert<T>(keep ? to_acc(x) * s : acc_t<T>(0)); }
};

}  // namespace

void dropout_mask(const Tensor& mask, double p, uint64_t seed, uint64_t offset) {
  const int64_t n = mask.numel();
  if (n == 0) return;
  dropout_mask_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream()>>>(ptr<bool>(mask), n, p * 4294967296.0, seed,
                                                                          offset);
  CUDA_CHECK_LAUNCH("dropout");
}

void masked_scale(const Tensor& out, const Tensor& in, const Tensor& mask, double scale) {
  dispatch_floating<DeviceTypes>(out.dtype(), "dropout", [&]<class T>() {
    launch_map<T, T, bool>("dropout", out, {&in, &mask}, MaskScale<T>{acc_t<T>(scale)});
  });
}

}  // namespace mdl::cuda
