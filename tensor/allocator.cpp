// The CPU allocator (64-byte aligned, zero-size safe; large blocks cached, tensor/cpu_block_cache.h)
// and the per-device memory counters.
#include "tensor/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "profiler/recorder.h"
#include "tensor/cpu_block_cache.h"
#include "tensor/error.h"

namespace mdl {

namespace {
constexpr int kMaxDevices = 16;

struct Counters {
  std::atomic<int64_t> live{0}, peak{0}, allocations{0}, blocks{0};
};
Counters g_cpu;
Counters g_cuda[kMaxDevices];

Counters& counters(Device d) {
  if (d.is_cpu()) return g_cpu;
  MDL_CHECK(d.index >= 0 && d.index < kMaxDevices, "memory_stats: device ", d, " out of range");
  return g_cuda[d.index];
}

// The bytes held for a request: 64-byte multiples (64 for zero), then the cache's size classes.
size_t cpu_block_bytes(size_t nbytes) {
  const size_t rounded = nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
  return cpu_cache::block_size(rounded);
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t block = cpu_block_bytes(nbytes);
    void* p = cpu_cache::take(block);
    if (!p) p = std::aligned_alloc(64, block);
    if (!p && cpu_cache::stats().cached_bytes > 0) {  // out of memory: give the cached blocks back, retry
      cpu_cache::empty();
      p = std::aligned_alloc(64, block);
    }
    if (!p) MDL_FAIL("cpu allocator: out of memory allocating ", nbytes, " bytes");
    detail::record_alloc(Device::cpu(), nbytes);
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!cpu_cache::give(p, cpu_block_bytes(nbytes))) std::free(p);
    detail::record_free(Device::cpu(), nbytes);
  }
  Device device() const override { return Device::cpu(); }
};

Allocator* g_cuda_allocator = nullptr;
}  // namespace

namespace detail {
void record_alloc(Device d, size_t nbytes) {
  Counters& c = counters(d);
  int64_t live = c.live.fetch_add(int64_t(nbytes)) + int64_t(nbytes);
  int64_t peak = c.peak.load();
  while (live > peak && !c.peak.compare_exchange_weak(peak, live)) {}
  c.allocations.fetch_add(1);
  c.blocks.fetch_add(1);
  if (profiler::detail::recording()) profiler::detail::record_memory(d, int64_t(nbytes), live);
}
void record_free(Device d, size_t nbytes) {
  Counters& c = counters(d);
  int64_t live = c.live.fetch_sub(int64_t(nbytes)) - int64_t(nbytes);
  c.blocks.fetch_sub(1);
  if (profiler::detail::recording()) profiler::detail::record_memory(d, -int64_t(nbytes), live);
}
}  // namespace detail

Allocator* cpu_allocator() {
  static CpuAllocator a;
  return &a;
}

void set_allocator(DeviceType t, Allocator* a) {
  MDL_CHECK(t == DeviceType::CUDA, "set_allocator: only the CUDA allocator can be replaced");
  g_cuda_allocator = a;
}

Allocator* allocator_for(Device d) {
  if (d.is_cpu()) return cpu_allocator();
  MDL_CHECK(cuda::is_available() && g_cuda_allocator,
            "allocate: device ", d, " is not available (", cuda::compiled() ? "no GPU found" : "no CUDA in this build", ")");
  MDL_CHECK(d.index < cuda::device_count(), "allocate: device ", d, " does not exist (", cuda::device_count(), " CUDA devices)");
  return g_cuda_allocator;
}

MemoryStats memory_stats(Device d) {
  Counters& c = counters(d);
  return {c.live.load(), c.peak.load(), c.allocations.load(), c.blocks.load()};
}

void reset_peak_memory(Device d) {
  Counters& c = counters(d);
  c.peak.store(c.live.load());
}

}  // namespace mdl
