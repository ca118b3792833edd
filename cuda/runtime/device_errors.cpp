// The host side of the device error record (cuda/runtime/device_errors.cuh): reading it at a
// synchronisation point and turning it into an mdl::Error, and cuda::check_errors().
#include "cuda/runtime/device_errors.cuh"

#include <bit>
#include <cstdint>

#include "cuda/api.h"
#include "cuda/runtime/context.cuh"
#include "kernels/amp.h"
#include "kernels/core.h"
#include "tensor/dtype.h"

namespace mdl::cuda::detail {

void raise_device_error(const char* where) {
  DeviceErrorRecord r{};
  CUDA_CHECK(where, cudaMemcpy(&r, device_errors(), sizeof(r), cudaMemcpyDeviceToHost));
  if (r.code == int(DeviceErrorCode::None)) return;
  CUDA_CHECK(where, cudaMemset(device_errors(), 0, sizeof(r)));
  const std::string suffix = std::string(" (found on the GPU, raised at ") + where + ")";
  switch (DeviceErrorCode(r.code)) {
    case DeviceErrorCode::IndexOutOfRange:
      kernels::fail_index_check(kernels::IndexCheck{r.op, r.what, r.bound, r.dim}, r.value, suffix.c_str());
    case DeviceErrorCode::IntegerDivisionByZero:
      MDL_FAIL("div: integer division by zero (dtype ", DType(r.value), ")", suffix);
    case DeviceErrorCode::NegativeIntegerPower:
      MDL_FAIL("pow: integers to negative integer powers are not allowed (dtype ", DType(r.value), ")", suffix);
    case DeviceErrorCode::ScaleUnderflow:
      kernels::fail_scale_underflow(std::bit_cast<float>(int32_t(r.bound)), std::bit_cast<float>(int32_t(r.dim)),
                                    r.value, suffix.c_str());
    default: MDL_FAIL("cuda: unknown device error code ", r.code, suffix);
  }
}

}  // namespace mdl::cuda::detail

namespace mdl::cuda {

void check_errors() {
  if (!is_available()) return;  // no GPU, no kernel that could have reported
  CUDA_CHECK("cuda::check_errors", cudaStreamSynchronize(detail::stream()));
  detail::raise_device_error("cuda::check_errors");
}

}  // namespace mdl::cuda
