// The caching device allocator: blocks rounded to 512 B (small, up to 1 MiB) or 2 MiB (large)
// are kept on free lists per stream after deallocate() and handed out again without cudaMalloc
// or cudaFree, as PyTorch's allocator does (without block splitting). On cudaMalloc OOM the cache
// is emptied and the call retried once. Blocks freed while a CUDA Graph is being captured are kept
// out of the free lists until the capture ends (the graph's kernels still address them).
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "tensor/cuda/allocator.cuh"
#include "tensor/cuda/context.cuh"
#include "tensor/cuda_api.h"

namespace mdl::cuda::detail {

namespace {

constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t(2) << 20;
constexpr size_t kSmallMax = size_t(1) << 20;

size_t round_size(size_t n) {
  if (n == 0) n = 1;
  return n <= kSmallMax ? (n + kSmallRound - 1) / kSmallRound * kSmallRound
                        : (n + kLargeRound - 1) / kLargeRound * kLargeRound;
}

struct Block {
  void* ptr;
  size_t size;
  cudaStream_t stream;
};

// Free blocks ordered by (stream, size, address): lower_bound finds the smallest that fits.
using FreeKey = std::tuple<cudaStream_t, size_t, void*>;

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t size = round_size(nbytes);
    cudaStream_t s = stream();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocations;
    Block b{nullptr, size, s};
    if (caching_) {
      // Large requests may take a cached block up to twice their size; small ones take their exact class.
      auto it = free_.lower_bound({s, size, nullptr});
      const size_t limit = size <= kSmallMax ? size : 2 * size;
      if (it != free_.end() && std::get<0>(*it) == s && std::get<1>(*it) <= limit) {
        b = {std::get<2>(*it), std::get<1>(*it), s};
        free_.erase(it);
        ++stats_.cache_hits;
      }
    }
    if (!b.ptr) b.ptr = device_malloc(size, nbytes);
    active_[b.ptr] = b;
    if (capture_token_) owner_[b.ptr] = capture_token_;
    stats_.allocated_bytes += int64_t(b.size);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    ::mdl::detail::record_alloc(Device::cuda(0), nbytes);
    return b.ptr;
  }

  void deallocate(void* p, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(p);
    if (it == active_.end()) return;  // not ours: nothing sane to do in a destructor
    const Block b = it->second;
    active_.erase(it);
    stats_.allocated_bytes -= int64_t(b.size);
    ::mdl::detail::record_free(Device::cuda(0), nbytes);
    auto own = owner_.find(p);
    const int64_t token = capture_token_ ? capture_token_ : own != owner_.end() ? own->second : 0;
    if (token) {
      parked_[token].push_back(b);
      if (own != owner_.end()) owner_.erase(own);
    } else if (caching_) {
      free_.insert({b.stream, b.size, b.ptr});
    } else {
      device_free(b);
    }
  }

  Device device() const override { return Device::cuda(0); }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_free_blocks();
  }

  CacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }
  void set_caching(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    caching_ = on;
    if (!on) release_free_blocks();
  }
  bool caching() {
    std::lock_guard<std::mutex> lock(mu_);
    return caching_;
  }

  // Blocks allocated or freed while a graph captures belong to that graph: when freed they are
  // parked, not reused, until the graph is released (its kernels keep addressing them).
  int64_t begin_capture() {
    std::lock_guard<std::mutex> lock(mu_);
    MDL_CHECK(capture_token_ == 0, "cuda::Graph: another capture is already in progress");
    capture_token_ = ++last_token_;
    return capture_token_;
  }
  void end_capture() {
    std::lock_guard<std::mutex> lock(mu_);
    capture_token_ = 0;
  }
  void release_graph(int64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = owner_.begin(); it != owner_.end();) it = it->second == token ? owner_.erase(it) : std::next(it);
    auto p = parked_.find(token);
    if (p == parked_.end()) return;
    for (const Block& b : p->second) free_.insert({b.stream, b.size, b.ptr});
    parked_.erase(p);
  }

 private:
  void* device_malloc(size_t size, size_t requested) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      ++stats_.oom_retries;
      release_free_blocks();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      MDL_FAIL("cuda allocator: cudaMalloc of ", size, " bytes (", requested, " requested) failed: ",
               cudaGetErrorString(e), "; allocated ", stats_.allocated_bytes, " bytes, reserved ",
               stats_.reserved_bytes, ", device free ", free_b, " of ", total_b);
    }
    ++stats_.device_mallocs;
    stats_.reserved_bytes += int64_t(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    return p;
  }
  void device_free(const Block& b) {
    // cudaFree waits for the device; a failure here is reported, never thrown from a destructor path.
    if (cudaFree(b.ptr) != cudaSuccess) (void)cudaGetLastError();
    ++stats_.device_frees;
    stats_.reserved_bytes -= int64_t(b.size);
  }
  void release_free_blocks() {
    for (const FreeKey& k : free_) device_free({std::get<2>(k), std::get<1>(k), std::get<0>(k)});
    free_.clear();
  }

  std::mutex mu_;
  std::set<FreeKey> free_;
  std::unordered_map<void*, Block> active_;
  std::unordered_map<void*, int64_t> owner_;              // block -> graph that captured it
  std::map<int64_t, std::vector<Block>> parked_;          // graph -> its freed blocks
  CacheStats stats_;
  bool caching_ = true;
  int64_t capture_token_ = 0, last_token_ = 0;
};

// Never destroyed: tensors may outlive static destruction order.
CachingAllocator& caching_allocator() {
  static auto* a = new CachingAllocator;
  return *a;
}

}  // namespace

Allocator* device_allocator() { return &caching_allocator(); }
int64_t allocator_begin_capture() { return caching_allocator().begin_capture(); }
void allocator_end_capture() { caching_allocator().end_capture(); }
void allocator_release_graph(int64_t token) { caching_allocator().release_graph(token); }

}  // namespace mdl::cuda::detail

namespace mdl::cuda {
CacheStats cache_stats() { return detail::caching_allocator().stats(); }
void reset_peak_cache_stats() { detail::caching_allocator().reset_peak(); }
void empty_cache() { detail::caching_allocator().empty_cache(); }
void set_caching_enabled(bool on) { detail::caching_allocator().set_caching(on); }
bool caching_enabled() { return detail::caching_allocator().caching(); }
}  // namespace mdl::cuda
