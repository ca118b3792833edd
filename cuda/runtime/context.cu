// mdl's stream and its cuBLAS/cuDNN/cuBLASLt handles (and cuBLASLt's workspace), created on
// first use on device 0.
#include <mutex>

#include "cuda/runtime/context.cuh"
#include "cuda/runtime/cublaslt.cuh"
#include "tensor/tensor.h"

namespace mdl::cuda::detail {

namespace {
struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
};

Context& context() {
  static Context c = [] {
    Context x;
    CUDA_CHECK("cuda init", cudaSetDevice(0));
    CUDA_CHECK("cuda init", cudaStreamCreate(&x.stream));
    return x;
  }();
  return c;
}
}  // namespace

cudaStream_t stream() { return context().stream; }

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t x;
    CUBLAS_CHECK("matmul", cublasCreate(&x));
    CUBLAS_CHECK("matmul", cublasSetStream(x, stream()));
    return x;
  }();
  return h;
}

cudnnHandle_t cudnn() {
  static cudnnHandle_t h = [] {
    cudnnHandle_t x;
    CUDNN_CHECK("conv2d", cudnnCreate(&x));
    CUDNN_CHECK("conv2d", cudnnSetStream(x, stream()));
    return x;
  }();
  return h;
}

cublasLtHandle_t cublaslt() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t x;
    stream();  // the device is selected first
    CUBLAS_CHECK("linear_act", cublasLtCreate(&x));
    return x;
  }();
  return h;
}

void* cublaslt_workspace() {
  static void* w = [] {
    void* p = nullptr;
    stream();
    CUDA_CHECK("linear_act", cudaMalloc(&p, kCublasLtWorkspaceBytes));
    return p;
  }();
  return w;
}

bool capturing() {
  cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
  CUDA_CHECK("cuda", cudaStreamIsCapturing(stream(), &s));
  return s != cudaStreamCaptureStatusNone;
}

void check_on_gpu(const char* op, const Tensor& t, const char* what) {
  MDL_CHECK(!t.defined() || t.device() == Device::cuda(0), op, ": ", what, " is on ", t.device(), ", expected cuda:0");
}

}  // namespace mdl::cuda::detail

namespace mdl::cuda {
void synchronize() { CUDA_CHECK("synchronize", cudaStreamSynchronize(detail::stream())); }
}  // namespace mdl::cuda
