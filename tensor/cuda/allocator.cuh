// The caching device allocator's hooks for the rest of the backend: the Allocator that
// register.cu installs for DeviceType::CUDA, and what cuda::Graph needs during capture.
#pragma once
#include <cstdint>

#include "tensor/allocator.h"

namespace mdl::cuda::detail {

Allocator* device_allocator();

// A capture's blocks stay reserved for its graph until allocator_release_graph(token).
int64_t allocator_begin_capture();
void allocator_end_capture();
void allocator_release_graph(int64_t token);

}  // namespace mdl::cuda::detail
