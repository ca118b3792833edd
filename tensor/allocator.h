// Allocators: where Storage gets its bytes, with per-device statistics (live, peak, count)
// so tests and benchmarks can see memory. The CPU allocator hands out 64-byte aligned blocks.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/device.h"

namespace mdl {

struct MemoryStats {
  int64_t live_bytes = 0;   // allocated now
  int64_t peak_bytes = 0;   // high-water mark since the last reset_peak_memory()
  int64_t allocations = 0;  // number of allocate() calls ever
  int64_t live_blocks = 0;  // blocks allocated now
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual Device device() const = 0;
};

Allocator* cpu_allocator();
Allocator* allocator_for(Device d);  // throws when the build lacks that device
// Lets a backend (CUDA) install its allocator; called by the backend's registration.
void set_allocator(DeviceType t, Allocator* a);

MemoryStats memory_stats(Device d = Device::cpu());
void reset_peak_memory(Device d = Device::cpu());

namespace detail {
// Bookkeeping shared by all allocators.
void record_alloc(Device d, size_t nbytes);
void record_free(Device d, size_t nbytes);
}  // namespace detail

}  // namespace mdl
