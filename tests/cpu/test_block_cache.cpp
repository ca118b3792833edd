// The CPU allocator's large-block cache: a freed block of 64 KiB or more is handed to the next
// request of the same rounded size; small blocks are not cached; the memory counters still count
// live tensors only; turning the cache off or emptying it returns the blocks.
#include <doctest/doctest.h>

#include "mdl.h"
#include "cpu/block_cache.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {
// Turns the cache on for a test (sanitizer builds start with it off) and restores the setting.
struct CacheOn {
  bool was = toggles::cpu_block_cache();
  CacheOn() {
    toggles::set_cpu_block_cache(false);  // start empty
    toggles::set_cpu_block_cache(true);
  }
  ~CacheOn() { toggles::set_cpu_block_cache(was); }
};
}  // namespace

TEST_CASE("cpu cache: a freed large block serves the next request of its size, with correct contents") {
  CacheOn on;
  const void* first = nullptr;
  {
    Tensor a = full({1024, 1024}, 3.0);  // 4 MiB
    first = a.raw_data();
  }
  const cpu_cache::Stats held = cpu_cache::stats();
  CHECK(held.cached_bytes >= 4 << 20);
  Tensor b = zeros({1024, 1024});
  CHECK(b.raw_data() == first);
  CHECK(cpu_cache::stats().hits == held.hits + 1);
  CHECK(cpu_cache::stats().cached_bytes == held.cached_bytes - (4 << 20));
  CHECK(sum(b).item<float>() == 0.0f);  // the reused block was filled, not left with the 3s
  Tensor c = ones({1000, 1024}) * 2.0;  // near size: same rounded block class, new block
  CHECK(sum(c).item<float>() == doctest::Approx(2.0 * 1000 * 1024));
}

TEST_CASE("cpu cache: small blocks are not cached; live bytes count tensors, not the cache") {
  CacheOn on;
  const int64_t live_before = memory_stats().live_bytes;
  { Tensor small = ones({256}); }
  CHECK(cpu_cache::stats().cached_bytes == 0);
  {
    Tensor big = ones({512, 1024});  // 2 MiB
    CHECK(memory_stats().live_bytes == live_before + (2 << 20));
  }
  CHECK(memory_stats().live_bytes == live_before);
  CHECK(cpu_cache::stats().cached_bytes == 2 << 20);
}

TEST_CASE("cpu cache: empty() and turning it off return every block") {
  CacheOn on;
  { Tensor a = ones({1024, 1024}); }
  CHECK(cpu_cache::stats().cached_bytes > 0);
  cpu_cache::empty();
  CHECK(cpu_cache::stats().cached_bytes == 0);
  { Tensor a = ones({1024, 1024}); }
  toggles::set_cpu_block_cache(false);
  CHECK(cpu_cache::stats().cached_bytes == 0);
  CHECK_FALSE(toggles::cpu_block_cache());
  { Tensor a = ones({1024, 1024}); }
  CHECK(cpu_cache::stats().cached_bytes == 0);  // off: freed straight back
}
