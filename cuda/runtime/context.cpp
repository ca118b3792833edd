// mdl's stream and its cuBLAS/cuDNN/cuBLASLt handles (and cuBLASLt's workspace), created on
// first use on device 0, with the device error record the kernels report bad values to.
#include <mutex>

#include "cuda/runtime/context.cuh"
#include "cuda/runtime/cublaslt.cuh"
#include "cuda/runtime/device_errors.cuh"
#include "tensor/tensor.h"

namespace mdl::cuda::detail {

namespace {
struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  DeviceErrorRecord* errors = nullptr;
  unsigned* counters = nullptr;
};

Context& context() {
  static Context c = [] {
    Context x;
    CUDA_CHECK("cuda init", cudaSetDevice(0));
    CUDA_CHECK("cuda init", cudaStreamCreate(&x.stream));
    // Before any capture can begin: allocating here never lands inside a CUDA Graph.
    CUDA_CHECK("cuda init", cudaMalloc(&x.errors, sizeof(DeviceErrorRecord)));
    CUDA_CHECK("cuda init", cudaMemset(x.errors, 0, sizeof(DeviceErrorRecord)));
    CUDA_CHECK("cuda init", cudaMalloc(&x.counters, size_t(kBlockCounters) * sizeof(unsigned)));
    CUDA_CHECK("cuda init", cudaMemset(x.counters, 0, size_t(kBlockCounters) * sizeof(unsigned)));
    return x;
  }();
  return c;
}
}  // namespace

cudaStream_t stream() { return context().stream; }
DeviceErrorRecord* device_errors() { return context().errors; }
unsigned* block_counters() { return context().counters; }

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
void synchronize() {
  CUDA_CHECK("synchronize", cudaStreamSynchronize(detail::stream()));
  detail::raise_device_error("cuda::synchronize");
}
}  // namespace mdl::cuda
