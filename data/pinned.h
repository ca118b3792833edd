// Page-locked ("pinned") host memory for batch buffers: the CUDA backend's cached cudaHostAlloc
// allocator (cuda/api.h) when a GPU is present, so host-to-device copies run at full
// speed; otherwise ordinary 64-byte aligned memory, with freed blocks kept for reuse.
#pragma once
#include <cstddef>

#include "tensor/allocator.h"
#include "tensor/tensor.h"

namespace mdl::data {

// True when pinned_allocator() hands out page-locked memory.
bool pinned_memory_available();
// A CPU allocator (Device::cpu(), counted in memory_stats): page-locked when available.
Allocator* pinned_allocator();
// An uninitialised contiguous tensor whose storage comes from pinned_allocator().
Tensor empty_pinned(const Shape& shape, DType dtype);

}  // namespace mdl::data
