// Dropout on the GPU with the CPU's counter-based Philox 4x32-10 (tensor/factory.cpp): element i
// is kept when word i % 4 of philox(seed, offset + i / 4) >= p * 2^32, so a mask depends on
// (seed, offset) only and equals the CPU's bit for bit. masked_scale applies it.
#include "tensor/cuda/elementwise.cuh"
#include "tensor/cuda/kernels.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

__device__ __forceinline__ uint4 philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return make_uint4(c0, c1, c2, c3);
}

__global__ void dropout_mask_kernel(bool* mask, int64_t n, double threshold, uint64_t seed, uint64_t offset) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks; b += int64_t(gridDim.x) * blockDim.x) {
    const uint4 r = philox(seed, offset + uint64_t(b));
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
    for (int j = 0; j < 4 && b * 4 + j < n; ++j) mask[b * 4 + j] = double(w[j]) >= threshold;
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
  dispatch_float(out.dtype(), "dropout", [&]<class T>() {
    launch_map<T, T, bool>("dropout", out, {&in, &mask}, MaskScale<T>{acc_t<T>(scale)});
  });
}

}  // namespace mdl::cuda
