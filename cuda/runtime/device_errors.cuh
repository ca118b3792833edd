// Errors found by kernels, kept on the device until the host next synchronises. A kernel that
// meets a bad value (an index out of range, an integer division by zero) records it here instead
// of the host reading the data first, which would stall the CPU on the GPU at every step and
// forbid CUDA Graph capture. The first error wins; the host reads the record where it waits for
// the GPU anyway (cuda::synchronize, cuda::check_errors, every host<->device copy, hence item()),
// clears it and throws the mdl::Error it describes.
#pragma once
#include <cstdint>

#include "cuda/runtime/check.h"

namespace mdl::cuda::detail {

enum class DeviceErrorCode : int {
  None = 0,
  IndexOutOfRange = 1,        // op, what, value, bound (the size), dim (-1: classes)
  IntegerDivisionByZero = 2,  // value: the DType
  NegativeIntegerPower = 3,   // value: the DType
  ScaleUnderflow = 4,         // value: the skipped steps; bound, dim: the f32 bits of the scale and
                              // of what it would have become
};

struct DeviceErrorRecord {
  int code;     // a DeviceErrorCode, written last
  int claimed;  // 0 until the first error claims the record
  // Host pointers to string literals, carried through the device, never read there.
  const char* op;
  const char* what;
  long long value, bound, dim;
};

// mdl's record in device memory, zeroed, created with the context (cuda/runtime/context.cpp).
DeviceErrorRecord* device_errors();

// Reads the record after the caller synchronised mdl's stream; when it holds an error, clears it
// and throws. `where` names the synchronisation point in the message.
void raise_device_error(const char* where);

#ifdef __CUDACC__
// In a kernel: the first caller fills the record, later ones leave it alone.
__device__ inline void report_device_error(DeviceErrorRecord* r, DeviceErrorCode code, const char* op, const char* what,
                                           long long value, long long bound, long long dim) {
  if (atomicCAS(&r->claimed, 0, 1) != 0) return;
  r->op = op;
  r->what = what;
  r->value = value;
  r->bound = bound;
  r->dim = dim;
  __threadfence();
  atomicExch(&r->code, int(code));
}
#endif

}  // namespace mdl::cuda::detail
