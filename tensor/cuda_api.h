// The CUDA backend's public controls, free of CUDA headers: the caching allocator's statistics
// and cache, synchronisation, the TF32 switch, pinned host memory for the data loader, and
// CUDA Graph capture. In a build without CUDA they are harmless (stats are zero, synchronize does
// nothing) except where they must hand out GPU resources: those throw mdl::Error.
#pragma once
#include <cstdint>
#include <memory>

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
  int64_t allocations = 0;           // allocate() calls
  int64_t cache_hits = 0;            // of those, served from the free lists
  int64_t device_mallocs = 0;        // cudaMalloc calls
  int64_t device_frees = 0;          // cudaFree calls
  int64_t oom_retries = 0;           // cudaMalloc failures that emptied the cache and retried
};
CacheStats cache_stats();
void reset_peak_cache_stats();
// Returns every cached free block to the driver (cudaFree). Blocks in use are untouched.
void empty_cache();
// false: every allocate/deallocate goes straight to cudaMalloc/cudaFree (for benchmarks).
void set_caching_enabled(bool on);
bool caching_enabled();

// Waits for all work queued on mdl's stream.
void synchronize();

// f32 matmuls may use TF32 tensor cores (10-bit mantissa products) when on. Default off.
void set_allow_tf32(bool on);
bool allow_tf32();

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

}  // namespace mdl::cuda
