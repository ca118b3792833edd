// The per-device memory counters every allocator reports to, and which allocator serves a device
// (the CPU's is cpu/allocator.cpp; CUDA's caching allocator installs itself with set_allocator).
#include "tensor/allocator.h"

#include <atomic>

#include "tensor/error.h"
#include "tensor/profiler_hook.h"

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

void set_allocator(DeviceType t, Allocator* a) {
  MDL_CHECK(t == DeviceType::CUDA, "set_allocator: only the CUDA allocator can be replaced");
  g_cuda_allocator = a;
}

Allocator* allocator_for(Device d) {
  if (d.is_cpu()) return cpu_allocator();
  MDL_CHECK(cuda::is_available() && g_cuda_allocator, "allocate: device ", d, " is not available (",
            cuda::compiled() ? "no GPU found" : "no CUDA in this build", ")");
  MDL_CHECK(d.index < cuda::device_count(), "allocate: device ", d, " does not exist (", cuda::device_count(),
            " CUDA devices)");
  // The CUDA backend's stream, handles and allocator are device 0's: a cuda:1 tensor would land on
  // cuda:0 and say so. One process per GPU (CUDA_VISIBLE_DEVICES) uses the others.
  MDL_CHECK(d.index == 0, "allocate: device ", d, ": mdl's CUDA backend runs on cuda:0 only (run one process per GPU, ",
            "each with CUDA_VISIBLE_DEVICES naming its own)");
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
