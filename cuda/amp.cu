// GradScaler's fused unscale-and-check on the GPU (kernels/amp.h): one pass multiplies
// the gradient by 1/scale in place and raises found_inf (on the device, no host sync) when any
// element was inf or NaN before scaling, tested on the exponent bits as the CPU does.
#include "cuda/kernels.cuh"
#include "cuda/common.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T>
__device__ __forceinline__ bool non_finite(T x) {
  if constexpr (std::is_same_v<T, float>) return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
  else return (uint64_t(__double_as_longlong(x)) & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}

template <class T>
__global__ void unscale_check_kernel(T* g, int64_t n, T inv, float* found_inf) {
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T x = g[i];
    bad |= non_finite(x);
    g[i] = x * inv;
  }
  if (bad) *found_inf = 1.0f;  // every writer stores the same value
}

}  // namespace

void unscale_check(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  check_on_gpu("amp_unscale_check", found_inf, "found_inf");
  MDL_CHECK(found_inf.dtype() == kF32 && found_inf.numel() == 1, "amp_unscale_check: found_inf must be one f32, got ",
            dtype_name(found_inf.dtype()), " ", shape_str(found_inf.shape()));
  const int64_t n = grad.numel();
  if (n == 0) return;
  float* flag = ptr<float>(found_inf);
  if (grad.dtype() == kF32)
    unscale_check_kernel<float><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(grad), n, float(inv_scale), flag);
  else if (grad.dtype() == kF64)
    unscale_check_kernel<double><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<double>(grad), n, inv_scale, flag);
  else MDL_FAIL("amp_unscale_check: expected an f32 or f64 gradient, got ", dtype_name(grad.dtype()));
  CUDA_CHECK_LAUNCH("amp_unscale_check");
}

}  // namespace mdl::cuda
