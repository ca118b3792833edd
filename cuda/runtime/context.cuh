// The per-process CUDA context mdl's kernels share: one stream (a blocking stream, so plain
// cudaMemcpy on the legacy stream stays ordered with it, and capturable for CUDA Graphs), the
// cuBLAS and cuDNN handles bound to it, and the launch geometry helpers.
#pragma once
#include <cstdint>

#include "cuda/runtime/check.h"

namespace mdl {
class Tensor;
}

namespace mdl::cuda::detail {

cudaStream_t stream();
cublasHandle_t cublas();
cudnnHandle_t cudnn();
// Whether mdl's stream is being captured into a CUDA Graph now.
bool capturing();

// kBlockCounters counters on the device, zero between kernels: a kernel whose blocks count
// themselves done on them (the last block of a group then finishes the group's work) sets each
// counter it used back to zero before it ends. Allocated and zeroed with the context, before any
// capture, so a kernel that uses them needs no memset of its own.
constexpr int64_t kBlockCounters = int64_t(1) << 16;
unsigned* block_counters();

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n items: enough to fill the GPU, never above the grid limit.
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b > (int64_t(1) << 20)) b = int64_t(1) << 20;
  return unsigned(b < 1 ? 1 : b);
}

// Throws unless the tensor lives on the GPU this backend drives.
void check_on_gpu(const char* op, const Tensor& t, const char* what);

}  // namespace mdl::cuda::detail
