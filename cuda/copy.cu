// fill and copy/cast on the GPU, and copies between host and device. A device copy is one map
// kernel over any strides and any pair of dtypes. A host<->device copy moves one contiguous block
// with cudaMemcpyAsync (staging through a contiguous temporary on the side that needs one) and
// leaves casts and strides to the device kernel or the CPU one. A host<->device copy waits for the
// GPU, so it also raises the first error a kernel found since the last check.
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "cuda/runtime/device_errors.cuh"
#include "kernels/views.h"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T>
struct Constant {
  T v;
  __device__ T operator()() const { return v; }
};
template <class To, class From>
struct Cast {
  __device__ To operator()(From x) const { return convert<To>(x); }
};

void device_copy(const Tensor& dst, const Tensor& src) {
  dispatch<DeviceTypes>(dst.dtype(), "copy", [&]<class To>() {
    dispatch<DeviceTypes>(src.dtype(), "copy",
                          [&]<class From>() { launch_map<To, From>("copy", dst, {&src}, Cast<To, From>{}); });
  });
}

bool dense_row_major(const Tensor& t) { return t.is_contiguous(); }

void memcpy_sync(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  MDL_CHECK(!capturing(), "copy: a host<->device copy cannot be captured in a CUDA Graph");
  CUDA_CHECK("copy", cudaMemcpyAsync(dst, src, n, kind, stream()));
  CUDA_CHECK("copy", cudaStreamSynchronize(stream()));
  raise_device_error(kind == cudaMemcpyDeviceToHost ? "a device-to-host copy" : "a host-to-device copy");
}

}  // namespace

void fill(const Tensor& out, double value) {
  dispatch<DeviceTypes>(out.dtype(), "fill",
                        [&]<class T>() { launch_map<T>("fill", out, {}, Constant<T>{convert_host<T>(value)}); });
}

void copy(const Tensor& dst, const Tensor& src) {
  const bool dst_gpu = dst.device().is_cuda(), src_gpu = src.device().is_cuda();
  if (dst_gpu) check_on_gpu("copy", dst, "destination");
  if (src_gpu) check_on_gpu("copy", src, "source");
  if (dst_gpu && src_gpu) return device_copy(dst, src);
  if (dst_gpu) {  // host -> device: a contiguous host block of src's dtype, then the device kernel
    const Tensor host = kernels::contiguous(src);
    if (dense_row_major(dst) && dst.dtype() == src.dtype())
      return memcpy_sync(dst.raw_data(), host.raw_data(), dst.nbytes(), cudaMemcpyHostToDevice);
    Tensor stage = make_tensor(src.shape(), src.dtype(), dst.device());
    memcpy_sync(stage.raw_data(), host.raw_data(), stage.nbytes(), cudaMemcpyHostToDevice);
    return device_copy(dst, stage);
  }
  // device -> host: a contiguous device block of src's dtype, then the CPU kernel casts and strides
  const Tensor dev = src.is_contiguous() ? src : kernels::contiguous(src);
  if (dense_row_major(dst) && dst.dtype() == src.dtype())
    return memcpy_sync(dst.raw_data(), dev.raw_data(), dst.nbytes(), cudaMemcpyDeviceToHost);
  Tensor stage = make_tensor(src.shape(), src.dtype(), Device::cpu());
  memcpy_sync(stage.raw_data(), dev.raw_data(), stage.nbytes(), cudaMemcpyDeviceToHost);
  kernels::copy(Device::cpu(), dst, stage);
}

}  // namespace mdl::cuda
