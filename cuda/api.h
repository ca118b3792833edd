// The CUDA backend's public controls, free of CUDA headers: the caching allocator's statistics
// and cache, synchronisation, pinned host memory for the data loader, and CUDA Graph capture; a
// side stream for host-to-device copies that overlap compute on mdl's stream (the DataLoader's)
// and the caching allocator's statistics per device. (The TF32 switches, allow_tf32 for matmuls and
// cudnn_allow_tf32 for convs, are toggles: switches/list/toggles.h.) In a build without CUDA they
// are harmless (stats are zero, synchronize does nothing, the per-device statistics are empty)
// except where they must hand out GPU resources
// (CopyStream, pinned memory, graphs): those throw mdl::Error.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/tensor.h"

namespace mdl::cuda {

// The caching device allocator, PyTorch-style: freed blocks go back to a per-stream free list and
// are reused without cudaMalloc/cudaFree. Sizes round up to 512 B (small) or 2 MiB (large).
struct CacheStats {
  int64_t allocated_bytes = 0;       // in blocks handed out now (rounded sizes)
  int64_t reserved_bytes = 0;        // obtained from cudaMalloc and not yet released
  int64_t peak_allocated_bytes = 0;  // since the last reset_peak_cache_stats()
  int64_t peak_reserved_bytes = 0;
  int64_t allocations = 0;     // allocate() calls
  int64_t cache_hits = 0;      // of those, served from the free lists
  int64_t device_mallocs = 0;  // cudaMalloc calls
  int64_t device_frees = 0;    // cudaFree calls
  int64_t oom_retries = 0;     // cudaMalloc failures that emptied the cache and retried
};
CacheStats cache_stats();
void reset_peak_cache_stats();
// Returns every cached free block to the driver (cudaFree). Blocks in use are untouched.
void empty_cache();

// Waits for all work queued on mdl's stream, then throws the first error a kernel found since
// the last check (an index out of range, an integer division by zero), naming the op.
void synchronize();
// The same, by its purpose: kernels report bad values on the device, without a host read per
// op; they surface here, at synchronize(), and at every host<->device copy (Tensor::item(),
// to(Device::cpu()), ...). Without CUDA it does nothing.
void check_errors();


// Page-locked host memory (cudaHostAlloc), cached by size: faster host<->device copies.
// Its device() is the CPU. Throws when CUDA is not available.
Allocator* pinned_allocator();
// A contiguous copy of a CPU tensor in pinned memory; throws when CUDA is not available.
Tensor pin_memory(const Tensor& x);
bool is_pinned(const Tensor& x);

// A captured sequence of GPU work replayed with one launch (cudaStreamBeginCapture ...
// cudaGraphLaunch). Work between capture_begin() and capture_end() is recorded, not run; replay()
// runs it again on the same memory. Tensors allocated during capture stay reserved for the graph
// while it lives, so replays read and write the same addresses. Shapes must be static, and no
// host<->device copy or host read of a CUDA tensor may happen inside the capture.
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void capture_begin();
  void capture_end();
  void replay();
  bool captured() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether mdl's stream is being captured into a Graph now (false without CUDA). Ops whose host
// side draws a value per call (dropout's random offset) refuse to be captured.
bool is_capturing();

// Per device.
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
// cuda/runtime/allocator.cpp), so the next copy never overwrites data that queued kernels still read.
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
  // For a copy that will never be waited for (a prefetched batch thrown away): its event goes back
  // to the pool. Unknown tickets are ignored.
  void release(uint64_t ticket);
  int64_t in_flight() const;  // copies neither waited for nor released

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

namespace detail {
// Fills the stubs' CUDA slots from the kernel table (no CUDA call; CUDA builds only): the device
// probe runs it when a GPU is found, the kernel registry test without one.
void fill_kernel_slots();
}  // namespace detail

}  // namespace mdl::cuda
