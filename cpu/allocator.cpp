// The CPU allocator: 64-byte aligned, zero-size safe, large blocks kept for reuse by the block
// cache (cpu/block_cache.h); every allocation is counted in the per-device memory statistics.
#include <cstdlib>
#include <new>

#include "cpu/block_cache.h"
#include "tensor/allocator.h"
#include "tensor/checked_size.h"
#include "tensor/error.h"

namespace mdl {

namespace {
// The bytes held for a request: 64-byte multiples (64 for zero), then the cache's size classes.
// Requests above kMaxAllocBytes are refused first, so no rounding can overflow.
size_t cpu_block_bytes(size_t nbytes) {
  check_alloc_bytes(nbytes, "cpu allocator");
  const int64_t rounded = nbytes == 0 ? 64 : checked_round_up(int64_t(nbytes), 64, "cpu allocator");
  return cpu_cache::block_size(size_t(rounded));
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
}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator a;
  return &a;
}

}  // namespace mdl
