// The CUDA controls in a build without the CUDA backend (cuda/*.cu define them otherwise).
#include "cuda/api.h"


namespace mdl::cuda {

#ifndef MDL_WITH_CUDA
CacheStats cache_stats() { return {}; }
void reset_peak_cache_stats() {}
void empty_cache() {}
void synchronize() {}
void check_errors() {}
Allocator* pinned_allocator() { MDL_FAIL("pin_memory: no CUDA in this build"); }
Tensor pin_memory(const Tensor&) { MDL_FAIL("pin_memory: no CUDA in this build"); }
bool is_pinned(const Tensor&) { return false; }

bool is_capturing() { return false; }
struct Graph::Impl {};
Graph::Graph() = default;
Graph::~Graph() = default;
void Graph::capture_begin() { MDL_FAIL("cuda::Graph: no CUDA in this build"); }
void Graph::capture_end() { MDL_FAIL("cuda::Graph: no CUDA in this build"); }
void Graph::replay() { MDL_FAIL("cuda::Graph: no CUDA in this build"); }
bool Graph::captured() const { return false; }

CacheStats cache_stats(int) { return {}; }
std::vector<int> cache_devices() { return {}; }
int64_t linear_act_fallbacks() { return 0; }
struct CopyStream::Impl {};
CopyStream::CopyStream(Device device) {
  MDL_FAIL("CopyStream: ", device, " was asked for, but this build has no CUDA (CUDA=0)");
}
CopyStream::~CopyStream() = default;
CopyStream::Copy CopyStream::copy(const Tensor&) { MDL_FAIL("CopyStream: no CUDA in this build"); }
Tensor CopyStream::wait(Copy&&) { MDL_FAIL("CopyStream: no CUDA in this build"); }
void CopyStream::release(uint64_t) {}
int64_t CopyStream::in_flight() const { return 0; }
#endif

}  // namespace mdl::cuda
