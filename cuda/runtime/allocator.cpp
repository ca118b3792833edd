// The caching device allocator: blocks rounded to 512 B (small, up to 1 MiB) or 2 MiB (large)
// are kept on free lists per (device, stream) after deallocate() and handed out again without
// cudaMalloc or cudaFree, as PyTorch's allocator does (without block splitting). Each block
// remembers the device that was current when it was allocated and returns to that device's pool;
// statistics are kept per device, with a total. On cudaMalloc OOM the cache is emptied and the
// call retried once. Blocks freed while a CUDA Graph is being captured are kept out of the free
// lists until the capture's graph is released (its kernels still address them).
//
// Streams: a block belongs to the stream it was allocated for, and is reused only by work on that
// stream, so stream order alone makes reuse safe. A side stream's block (the data loader writes a
// batch there) is also read by kernels on mdl's stream; when it is freed, an event is recorded on
// mdl's stream and the block waits in `pending_` until that event has completed, so the side
// stream never overwrites memory that queued kernels still read (PyTorch's record_stream, applied
// to every side-stream block, since all of them are handed to mdl's stream).
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cuda/runtime/allocator.cuh"
#include "cuda/runtime/context.cuh"
#include "cuda/api.h"
#include "switches/list/toggles.h"
#include "tensor/checked_size.h"

namespace mdl::cuda::detail {

namespace {

constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t(2) << 20;
constexpr size_t kSmallMax = size_t(1) << 20;

// Requests above kMaxAllocBytes are refused first, so the rounding cannot overflow.
size_t round_size(size_t n) {
  check_alloc_bytes(n, "cuda allocator");
  if (n == 0) n = 1;
  return size_t(checked_round_up(int64_t(n), int64_t(n <= kSmallMax ? kSmallRound : kLargeRound), "cuda allocator"));
}

struct Block {
  void* ptr;
  size_t size;
  cudaStream_t stream;
  int device;
};

// Free blocks ordered by (device, stream, size, address): lower_bound finds the smallest that fits.
using FreeKey = std::tuple<int, cudaStream_t, size_t, void*>;

// Switches the current device for a scope (cudaFree of another device's block), restoring it after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) (void)cudaGetLastError(), prev_ = -1;
    if (prev_ != device && prev_ >= 0 && cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
    switched_ = prev_ != device && prev_ >= 0;
  }
  ~DeviceScope() {
    if (switched_ && cudaSetDevice(prev_) != cudaSuccess) (void)cudaGetLastError();
  }

 private:
  int prev_ = -1;
  bool switched_ = false;
};

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override { return allocate_on(nbytes, stream()); }

  void* allocate_on(size_t nbytes, cudaStream_t s) {
    const size_t size = round_size(nbytes);
    int dev = 0;
    CUDA_CHECK("cuda allocator", cudaGetDevice(&dev));
    std::lock_guard<std::mutex> lock(mu_);
    collect_pending();
    for (CacheStats* st : stats_of(dev)) ++st->allocations;
    Block b{nullptr, size, s, dev};
    if (toggles::cuda_caching_allocator()) {
      // Large requests may take a cached block up to twice their size; small ones take their exact class.
      auto it = free_.lower_bound({dev, s, size, nullptr});
      const size_t limit = size <= kSmallMax ? size : 2 * size;
      if (it != free_.end() && std::get<0>(*it) == dev && std::get<1>(*it) == s && std::get<2>(*it) <= limit) {
        b.ptr = std::get<3>(*it);
        b.size = std::get<2>(*it);
        free_.erase(it);
        for (CacheStats* st : stats_of(dev)) ++st->cache_hits;
      }
    }
    if (!b.ptr) b.ptr = device_malloc(size, nbytes, dev);
    active_[b.ptr] = b;
    if (capture_token_) owner_[b.ptr] = capture_token_;
    for (CacheStats* st : stats_of(dev)) {
      st->allocated_bytes += int64_t(b.size);
      st->peak_allocated_bytes = std::max(st->peak_allocated_bytes, st->allocated_bytes);
    }
    ::mdl::detail::record_alloc(Device::cuda(dev), nbytes);
    return b.ptr;
  }

  void deallocate(void* p, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(p);
    if (it == active_.end()) return;  // not ours: nothing sane to do in a destructor
    const Block b = it->second;
    active_.erase(it);
    for (CacheStats* st : stats_of(b.device)) st->allocated_bytes -= int64_t(b.size);
    ::mdl::detail::record_free(Device::cuda(b.device), nbytes);
    // Parked for the graph that allocated the block and for the one capturing now, if any: each may
    // replay into it, and it is reused only once both are released.
    auto own = owner_.find(p);
    const int64_t owner = own != owner_.end() ? own->second : 0;
    const int64_t capturer = capture_token_ != owner ? capture_token_ : 0;
    if (owner || capturer) {
      if (owner) parked_[owner].push_back(b);
      if (capturer) parked_[capturer].push_back(b);
      if (owner && capturer) shared_[b.ptr] = 2;
      if (own != owner_.end()) owner_.erase(own);
    } else if (!toggles::cuda_caching_allocator()) {
      device_free(b);  // cudaFree waits for the device, whatever stream last used the block
    } else if (b.stream != stream()) {
      park_until_main_stream_passes(b);
    } else {
      free_.insert({b.device, b.stream, b.size, b.ptr});
    }
  }

  Device device() const override { return Device::cuda(0); }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    collect_pending();
    release_free_blocks();
  }

  CacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  CacheStats stats(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = per_device_.find(device);
    return it == per_device_.end() ? CacheStats{} : it->second;
  }
  std::vector<int> devices() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> d;
    for (const auto& [dev, st] : per_device_) d.push_back(dev);
    return d;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    for (CacheStats* st : all_stats()) {
      st->peak_allocated_bytes = st->allocated_bytes;
      st->peak_reserved_bytes = st->reserved_bytes;
    }
  }
  // The cuda_caching_allocator toggle turned off: what the cache holds goes back to the driver.
  void caching_turned_off() {
    std::lock_guard<std::mutex> lock(mu_);
    collect_pending();
    release_free_blocks();
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
    // The graph's owner synchronized mdl's stream before releasing, so side-stream blocks are idle too.
    for (const Block& b : p->second) {
      auto h = shared_.find(b.ptr);
      if (h != shared_.end() && --h->second > 0) continue;  // the other graph still addresses it
      if (h != shared_.end()) shared_.erase(h);
      free_.insert({b.device, b.stream, b.size, b.ptr});
    }
    parked_.erase(p);
  }

 private:
  // The device's statistics and the total, updated together.
  std::array<CacheStats*, 2> stats_of(int device) { return {&per_device_[device], &total_}; }
  std::vector<CacheStats*> all_stats() {
    std::vector<CacheStats*> v{&total_};
    for (auto& [dev, st] : per_device_) v.push_back(&st);
    return v;
  }

  void* device_malloc(size_t size, size_t requested, int dev) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      for (CacheStats* st : stats_of(dev)) ++st->oom_retries;
      if (!capture_token_) {  // side-stream blocks waiting on mdl's stream are free once it has run
        if (cudaStreamSynchronize(stream()) != cudaSuccess) (void)cudaGetLastError();
        collect_pending();
      }
      release_free_blocks();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      (void)cudaGetLastError();
      const CacheStats& st = per_device_[dev];
      MDL_FAIL("cuda allocator: cudaMalloc of ", size, " bytes (", requested, " requested) on cuda:", dev,
               " failed: ", cudaGetErrorString(e), "; allocated ", st.allocated_bytes, " bytes, reserved ",
               st.reserved_bytes, ", device free ", free_b, " of ", total_b);
    }
    for (CacheStats* st : stats_of(dev)) {
      ++st->device_mallocs;
      st->reserved_bytes += int64_t(size);
      st->peak_reserved_bytes = std::max(st->peak_reserved_bytes, st->reserved_bytes);
    }
    return p;
  }
  void device_free(const Block& b) {
    // cudaFree waits for the device; a failure here is cleared, never thrown from a destructor path.
    DeviceScope on(b.device);
    if (cudaFree(b.ptr) != cudaSuccess) (void)cudaGetLastError();
    for (CacheStats* st : stats_of(b.device)) {
      ++st->device_frees;
      st->reserved_bytes -= int64_t(b.size);
    }
  }
  void release_free_blocks() {
    for (const FreeKey& k : free_) device_free({std::get<3>(k), std::get<2>(k), std::get<1>(k), std::get<0>(k)});
    free_.clear();
  }

  // A side-stream block freed now may still be read by kernels queued on mdl's stream: an event
  // recorded there marks the point after which the side stream may write it again.
  void park_until_main_stream_passes(const Block& b) {
    cudaEvent_t ev = nullptr;
    if (!events_.empty()) {
      ev = events_.back();
      events_.pop_back();
    } else if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      ev = nullptr;
    }
    if (ev && cudaEventRecord(ev, stream()) == cudaSuccess) {
      pending_.push_back({b, ev});
      return;
    }
    (void)cudaGetLastError();
    if (ev) events_.push_back(ev);
    // No event: wait for mdl's stream here instead (rare; correct, only slower).
    if (cudaStreamSynchronize(stream()) != cudaSuccess) (void)cudaGetLastError();
    free_.insert({b.device, b.stream, b.size, b.ptr});
  }
  // Moves the pending blocks whose event has completed to their free list (not during a capture:
  // no event calls while mdl's stream records).
  void collect_pending() {
    if (capture_token_) return;
    for (auto it = pending_.begin(); it != pending_.end();) {
      const cudaError_t e = cudaEventQuery(it->second);
      if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        ++it;
        continue;
      }
      if (e != cudaSuccess) (void)cudaGetLastError();  // a failed device: the block is idle either way
      const Block& b = it->first;
      if (toggles::cuda_caching_allocator()) free_.insert({b.device, b.stream, b.size, b.ptr});
      else device_free(b);
      events_.push_back(it->second);
      it = pending_.erase(it);
    }
  }

  std::mutex mu_;
  std::set<FreeKey> free_;
  std::unordered_map<void*, Block> active_;
  std::unordered_map<void*, int64_t> owner_;            // block -> graph that captured it
  std::map<int64_t, std::vector<Block>> parked_;        // graph -> its freed blocks
  std::unordered_map<void*, int> shared_;               // block parked for two graphs -> those not yet released
  std::vector<std::pair<Block, cudaEvent_t>> pending_;  // side-stream blocks waiting on mdl's stream
  std::vector<cudaEvent_t> events_;                     // idle events for pending_
  std::map<int, CacheStats> per_device_;
  CacheStats total_;
  int64_t capture_token_ = 0, last_token_ = 0;
};

// Never destroyed: tensors may outlive static destruction order.
CachingAllocator& caching_allocator() {
  static auto* a = new CachingAllocator;
  return *a;
}

// Allocates for one side stream through the caching allocator.
class SideStreamAllocator final : public Allocator {
 public:
  explicit SideStreamAllocator(cudaStream_t s) : s_(s) {}
  void* allocate(size_t nbytes) override { return caching_allocator().allocate_on(nbytes, s_); }
  void deallocate(void* p, size_t nbytes) override { caching_allocator().deallocate(p, nbytes); }
  Device device() const override { return Device::cuda(0); }

 private:
  cudaStream_t s_;
};

}  // namespace

Allocator* device_allocator() { return &caching_allocator(); }

Allocator* side_stream_allocator(cudaStream_t s) {
  static std::mutex mu;
  static auto* by_stream = new std::map<cudaStream_t, std::unique_ptr<SideStreamAllocator>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  auto& a = (*by_stream)[s];
  if (!a) a = std::make_unique<SideStreamAllocator>(s);
  return a.get();
}

int64_t allocator_begin_capture() { return caching_allocator().begin_capture(); }
void allocator_end_capture() { caching_allocator().end_capture(); }
void allocator_release_graph(int64_t token) { caching_allocator().release_graph(token); }

}  // namespace mdl::cuda::detail

namespace mdl::cuda {
CacheStats cache_stats() { return detail::caching_allocator().stats(); }
CacheStats cache_stats(int device) { return detail::caching_allocator().stats(device); }
std::vector<int> cache_devices() { return detail::caching_allocator().devices(); }
void reset_peak_cache_stats() { detail::caching_allocator().reset_peak(); }
void empty_cache() { detail::caching_allocator().empty_cache(); }
namespace {
const bool g_hooked = toggles::on_change(toggles::Toggle::cuda_caching_allocator, [](bool on) {
  if (!on) detail::caching_allocator().caching_turned_off();
});
}  // namespace
}  // namespace mdl::cuda
