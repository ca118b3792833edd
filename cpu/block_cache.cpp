// Free lists of large CPU blocks keyed by rounded size, bounded in total bytes.
#include "cpu/block_cache.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>

#include "switches/list/toggles.h"
#include "tensor/checked_size.h"

namespace mdl::cpu_cache {

namespace detail_cache {

// Smaller blocks stay in malloc's bins. A conv's per-thread scratch of 100-600 KiB, left to malloc,
// page-faulted on every call (the heap's top trimmed between calls): a 128-channel 16x16 bf16 conv
// took 7.2 ms with a 1 MiB floor here, 3.9 ms with this one (Zen 5).
constexpr size_t kMinBlock = size_t(64) << 10;
constexpr size_t kMaxCached = size_t(2) << 30;  // never hold more than 2 GiB free

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free;  // rounded size -> block
  size_t cached = 0;
  int64_t hits = 0, misses = 0;
};

// Never destroyed: tensors in other static objects may be freed after main returns.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

// Large sizes round up to 1/8 of their power of two, so near sizes share blocks. Sizes above
// kMaxAllocBytes are refused, so the power of two and the rounding cannot overflow.
size_t round_size(size_t n) {
  check_alloc_bytes(n, "cpu block cache");
  const size_t step = std::max<size_t>(std::bit_ceil(n) / 8, 64);
  return size_t(checked_round_up(int64_t(n), int64_t(step), "cpu block cache"));
}

void drain_locked(Cache& c) {
  for (auto& [size, p] : c.free) std::free(p);
  c.free.clear();
  c.cached = 0;
}

}  // namespace detail_cache

using namespace detail_cache;

void* take(size_t block) {
  if (block < kMinBlock) return nullptr;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!toggles::cpu_block_cache()) return nullptr;
  auto it = c.free.find(block);
  if (it == c.free.end()) {
    ++c.misses;
    return nullptr;
  }
  void* p = it->second;
  c.free.erase(it);
  c.cached -= block;
  ++c.hits;
  return p;
}

bool give(void* p, size_t block) {
  if (block < kMinBlock) return false;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!toggles::cpu_block_cache() || c.cached + block > kMaxCached) return false;
  c.free.emplace(block, p);
  c.cached += block;
  return true;
}

size_t block_size(size_t rounded) { return rounded < kMinBlock ? rounded : round_size(rounded); }

Stats stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {int64_t(c.cached), c.hits, c.misses};
}

// Turning the cpu_block_cache toggle off returns what the cache holds.
const bool g_hooked = toggles::on_change(toggles::Toggle::cpu_block_cache, [](bool on) {
  if (!on) empty();
});

void empty() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  drain_locked(c);
}

}  // namespace mdl::cpu_cache
