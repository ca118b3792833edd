// GradScaler on the GPU (kernels/amp.h): one pass multiplies the gradient by 1/scale in place and
// raises found_inf when any element was inf or NaN before scaling, tested on the exponent bits as
// the CPU does; then one thread updates the scale. Scale and flag stay on the device: no host sync.
#include "cuda/kernels.cuh"
#include "cuda/common.cuh"
#include "cuda/multi_tensor.cuh"
#include "cuda/runtime/device_errors.cuh"

#include <cfloat>

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T>
__device__ __forceinline__ bool non_finite(T x) {
  if constexpr (std::is_same_v<T, float>) return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
  else return (uint64_t(__double_as_longlong(x)) & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}

// g[i] *= inv; true when g[i] was inf or NaN.
template <class T>
__device__ __forceinline__ bool unscale_element(T* g, int64_t i, T inv) {
  const T x = g[i];
  g[i] = x * inv;
  return non_finite(x);
}

template <class T>
__global__ void unscale_check_kernel(T* g, int64_t n, const float* scale, float* found_inf) {
  const T inv = T(1) / T(*scale);
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    bad |= unscale_element(g, i, inv);
  if (bad) *found_inf = 1.0f;  // every writer stores the same value
}

// Up to kMaxTensors gradients of type T (cuda/multi_tensor.cuh).
struct GradPointers {
  void* g[kMaxTensors];
  ChunkMap map;
};
template <class T>
__global__ void unscale_check_many_kernel(GradPointers c, const float* scale, float* found_inf) {
  const int b = int(blockIdx.x), t = c.map.tensor_of(b);
  int64_t begin, end;
  c.map.range(b, t, begin, end);
  T* g = static_cast<T*>(c.g[t]);
  const T inv = T(1) / T(*scale);
  bool bad = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) bad |= unscale_element(g, i, inv);
  if (bad) *found_inf = 1.0f;
}

// One thread: the scaler's state is four scalars.
__global__ void update_scale_kernel(float* scale, int64_t* tracker, int64_t* skipped, const float* found_inf,
                                    kernels::ScaleUpdate u, DeviceErrorRecord* errors) {
  if (*found_inf != 0.0f) {
    const float backed_off = float(double(*scale) * u.backoff_factor);
    if (backed_off < FLT_MIN) {  // the scale stays; the host raises at its next synchronisation
      report_device_error(errors, DeviceErrorCode::ScaleUnderflow, "GradScaler.update", "scale", *skipped + 1,
                          __float_as_int(*scale), __float_as_int(backed_off));
      return;
    }
    *scale = backed_off;
    *tracker = 0;
    *skipped += 1;
  } else if (++*tracker == u.growth_interval) {
    const double grown = double(*scale) * u.growth_factor;
    if (grown <= double(FLT_MAX)) *scale = float(grown);
    *tracker = 0;
  }
}

void check_scalar(const char* op, const Tensor& t, const char* what, DType dtype) {
  check_on_gpu(op, t, what);
  MDL_CHECK(t.dtype() == dtype && t.numel() == 1, op, ": ", what, " must be one ", dtype_name(dtype), ", got ",
            dtype_name(t.dtype()), " ", shape_str(t.shape()));
}

}  // namespace

void unscale_check(const Tensor& grad, const Tensor& found_inf, const Tensor& scale) {
  check_scalar("amp_unscale_check", found_inf, "found_inf", kF32);
  check_scalar("amp_unscale_check", scale, "scale", kF32);
  const int64_t n = grad.numel();
  if (n == 0) return;
  float* flag = ptr<float>(found_inf);
  const float* s = ptr<const float>(scale);
  if (grad.dtype() == kF32)
    unscale_check_kernel<float><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<float>(grad), n, s, flag);
  else if (grad.dtype() == kF64)
    unscale_check_kernel<double><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<double>(grad), n, s, flag);
  else MDL_FAIL("amp_unscale_check: expected an f32 or f64 gradient, got ", dtype_name(grad.dtype()));
  CUDA_CHECK_LAUNCH("amp_unscale_check");
}

void unscale_check_many(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& scale) {
  check_scalar("amp_unscale_check_many", found_inf, "found_inf", kF32);
  check_scalar("amp_unscale_check_many", scale, "scale", kF32);
  float* flag = ptr<float>(found_inf);
  const float* s = ptr<const float>(scale);
  for (const Tensor& g : grads)
    MDL_CHECK(g.dtype() == kF32 || g.dtype() == kF64, "amp_unscale_check_many: expected f32 or f64 gradients, got ",
              dtype_name(g.dtype()));
  auto run = [&]<class T>(DType dt) {
    std::vector<Tensor> of;
    for (const Tensor& g : grads)
      if (g.dtype() == dt) of.push_back(g);
    for_each_launch(
        "amp_unscale_check_many", of.size(), [&](size_t i) { return of[i].numel(); },
        [&](const ChunkMap& map, const size_t* slots, int blocks) {
          GradPointers c{};
          c.map = map;
          for (int k = 0; k < map.count; ++k) c.g[k] = of[slots[k]].raw_data();
          unscale_check_many_kernel<T><<<unsigned(blocks), kThreads, 0, stream()>>>(c, s, flag);
          CUDA_CHECK_LAUNCH("amp_unscale_check_many");
        });
  };
  run.operator()<float>(kF32);
  run.operator()<double>(kF64);
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& skipped, const Tensor& found_inf,
                  const kernels::ScaleUpdate& u) {
  check_scalar("amp_update_scale", scale, "scale", kF32);
  check_scalar("amp_update_scale", growth_tracker, "growth_tracker", kI64);
  check_scalar("amp_update_scale", skipped, "skipped", kI64);
  check_scalar("amp_update_scale", found_inf, "found_inf", kF32);
  update_scale_kernel<<<1, 1, 0, stream()>>>(ptr<float>(scale), ptr<int64_t>(growth_tracker), ptr<int64_t>(skipped),
                                             ptr<const float>(found_inf), u, device_errors());
  CUDA_CHECK_LAUNCH("amp_update_scale");
}

}  // namespace mdl::cuda
