// The CUDA controls in a build without the CUDA backend (cuda/*.cu define them otherwise),
// and the TF32, cuDNN-benchmark and flash-attention switches, which are plain state in both builds.
#include "cuda/api.h"

#include <atomic>

namespace mdl::cuda {

namespace {
std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_cudnn_benchmark{true};
std::atomic<bool> g_flash_attention{true};
}  // namespace
void set_allow_tf32(bool on) { g_allow_tf32.store(on); }
bool allow_tf32() { return g_allow_tf32.load(); }
void set_cudnn_benchmark(bool on) { g_cudnn_benchmark.store(on); }
bool cudnn_benchmark() { return g_cudnn_benchmark.load(); }
void set_flash_attention(bool on) { g_flash_attention.store(on); }
bool flash_attention() { return g_flash_attention.load(); }

#ifndef MDL_WITH_CUDA
namespace {
std::atomic<bool> g_caching{true};  // kept so the switch reads back what was set; there is nothing to cache
}
CacheStats cache_stats() { return {}; }
void reset_peak_cache_stats() {}
void empty_cache() {}
void set_caching_enabled(bool on) { g_caching.store(on); }
bool caching_enabled() { return g_caching.load(); }
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
