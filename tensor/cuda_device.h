// The CUDA backend's multi-stream and multi-device controls, free of CUDA headers: a side stream
// for host-to-device copies that overlap compute on mdl's stream (the DataLoader's), and the
// caching allocator's statistics per device. Without CUDA or a GPU, CopyStream throws mdl::Error
// and the statistics are empty.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/cuda_api.h"

namespace mdl::cuda {

// The caching allocator's statistics for one device index (cache_stats() is the total over all),
// and the device indices it has served, ascending.
CacheStats cache_stats(int device);
std::vector<int> cache_devices();

// How many fused linear calls (nn::functional::linear with an activation) cuBLASLt could not take,
// so that the GEMM ran through cuBLAS and our own bias+activation kernel: f64, GELU with
// out_features not a multiple of 8, or no algorithm for the shape/alignment. 0 without CUDA.
int64_t linear_act_fallbacks();

// Host-to-device copies on a side stream (one per process, created on first use, never
// destroyed). The device memory comes from the caching allocator's pool for that stream; a freed
// block goes back to it only once mdl's stream has passed the point of the free (see
// tensor/cuda/allocator.cu), so the next copy never overwrites data that queued kernels still read.
//
//   cuda::CopyStream copies(Device::cuda());
//   auto c = copies.copy(pinned_batch);        // on the side stream; the host buffer is free again
//   Tensor x = copies.wait(std::move(c));      // mdl's stream waits for the copy's event
class CopyStream {
 public:
  // Throws mdl::Error naming `device` when the build has no CUDA, no GPU is found, or device is not cuda:0.
  explicit CopyStream(Device device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  struct Copy {
    Tensor tensor;        // on the device, contiguous
    uint64_t ticket = 0;  // the copy's event, for wait()
  };
  // Copies a CPU tensor (any strides; pinned memory makes the DMA asynchronous) on the side stream
  // and records an event after it. Returns once the copy has completed, so the host buffer may be
  // reused at once; kernels on mdl's stream must still wait() for it to be ordered after the copy.
  Copy copy(const Tensor& host);
  // Makes mdl's stream wait for the copy's event (cudaStreamWaitEvent) and returns the tensor.
  Tensor wait(Copy&& c);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mdl::cuda
