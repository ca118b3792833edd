// The caching device allocator's hooks for the rest of the backend: the Allocator that
// register.cu installs for DeviceType::CUDA, allocators for side streams (the data loader's copy
// stream), and what cuda::Graph needs during capture.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/allocator.h"

namespace mdl::cuda::detail {

// Blocks for work on mdl's stream.
Allocator* device_allocator();
// Blocks written on side stream s and then used on mdl's stream: each is handed back to s's free
// list only after mdl's stream has passed the point where it was freed. Never destroyed.
Allocator* side_stream_allocator(cudaStream_t s);

// A capture's blocks stay reserved for its graph until allocator_release_graph(token).
int64_t allocator_begin_capture();
void allocator_end_capture();
void allocator_release_graph(int64_t token);

}  // namespace mdl::cuda::detail
