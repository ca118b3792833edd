// Status checks for every CUDA runtime, cuBLAS and cuDNN call: a failure throws mdl::Error naming
// the call, the status and the op, e.g. "matmul: cublasGemmStridedBatchedEx failed:
// CUBLAS_STATUS_INVALID_VALUE". Included by cuda/*.cu only (it pulls in the CUDA headers).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "tensor/error.h"

namespace mdl::cuda::detail {

inline const char* status_string(cudaError_t s) { return cudaGetErrorString(s); }
inline const char* status_string(cublasStatus_t s) { return cublasGetStatusString(s); }
inline const char* status_string(cudnnStatus_t s) { return cudnnGetErrorString(s); }

// A failed runtime call leaves its error as the thread's last one: cleared before throwing, so the
// next launch's cudaGetLastError does not report it against an op that did nothing wrong (a sticky
// error, a kernel's fault, stays whatever is cleared).
inline void clear_last_error(cudaError_t) { (void)cudaGetLastError(); }
inline void clear_last_error(cublasStatus_t) {}
inline void clear_last_error(cudnnStatus_t) {}

[[noreturn]] inline void fail_call(const char* op, const char* call, const char* status, const char* file, int line) {
  MDL_FAIL(op, ": ", call, " failed: ", status, " (", file, ":", line, ")");
}

}  // namespace mdl::cuda::detail

// CUDA_CHECK(op, cudaMemcpy(...)): op names the mdl op the call serves.
#define MDL_CUDA_STATUS_CHECK(op, call, ok)                                                                           \
  do {                                                                                                                \
    const auto mdl_status_ = (call);                                                                                  \
    if (mdl_status_ != (ok)) [[unlikely]] {                                                                           \
      ::mdl::cuda::detail::clear_last_error(mdl_status_);                                                             \
      ::mdl::cuda::detail::fail_call(op, #call, ::mdl::cuda::detail::status_string(mdl_status_), __FILE__, __LINE__); \
    }                                                                                                                 \
  } while (0)

#define CUDA_CHECK(op, call) MDL_CUDA_STATUS_CHECK(op, call, cudaSuccess)
#define CUBLAS_CHECK(op, call) MDL_CUDA_STATUS_CHECK(op, call, CUBLAS_STATUS_SUCCESS)
#define CUDNN_CHECK(op, call) MDL_CUDA_STATUS_CHECK(op, call, CUDNN_STATUS_SUCCESS)
// After a kernel launch: a bad configuration shows up here, by op name.
#define CUDA_CHECK_LAUNCH(op) CUDA_CHECK(op, cudaGetLastError())
