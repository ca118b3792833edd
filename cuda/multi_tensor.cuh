// Multi-tensor launches (PyTorch's multi_tensor_apply): the elements of many tensors in one grid,
// each block one chunk of kChunk elements of one tensor. A launch's tensors go by value in the
// kernel's parameters (a CUDA Graph keeps them with the launch), up to kMaxTensors of them, so an
// optimizer step or a gradient unscale over a model's parameters is a few launches, not one each.
#pragma once
#include <cstdint>

#include "cuda/common.cuh"

namespace mdl::cuda::detail {

constexpr int kMaxTensors = 24;
constexpr int64_t kChunk = 16 * kThreads;

// Which tensor and which elements each block of a launch works on.
struct ChunkMap {
  int64_t n[kMaxTensors];      // elements of tensor t
  int first[kMaxTensors + 1];  // block b works on tensor t where first[t] <= b < first[t + 1]
  int count;

  __device__ __forceinline__ int tensor_of(int b) const {
    int t = 0;
    while (t + 1 < count && first[t + 1] <= b) ++t;
    return t;
  }
  // Elements [begin, end) of tensor t for block b.
  __device__ __forceinline__ void range(int b, int t, int64_t& begin, int64_t& end) const {
    begin = int64_t(b - first[t]) * kChunk;
    end = begin + kChunk < n[t] ? begin + kChunk : n[t];
  }
};

// Splits tensors 0 .. count-1, of size(i) elements each (empty ones left out), into launches of up
// to kMaxTensors: launch(map, slots, blocks) where slots[k] is the index of map's tensor k.
template <class Size, class Launch>
void for_each_launch(const char* op, size_t count, const Size& size, const Launch& launch) {
  ChunkMap map{};
  size_t slots[kMaxTensors];
  int blocks = 0;
  auto flush = [&] {
    if (map.count == 0) return;
    map.first[map.count] = blocks;
    launch(map, slots, blocks);
    map = ChunkMap{};
    blocks = 0;
  };
  for (size_t i = 0; i < count; ++i) {
    const int64_t n = size(i);
    if (n == 0) continue;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    MDL_CHECK(chunks < (int64_t(1) << 30), op, ": a tensor of ", n, " elements is too large for one launch");
    if (map.count == kMaxTensors || int64_t(blocks) + chunks >= (int64_t(1) << 30)) flush();
    const int k = map.count++;
    slots[k] = i;
    map.n[k] = n;
    map.first[k] = blocks;
    blocks += int(chunks);
  }
  flush();
}

}  // namespace mdl::cuda::detail
