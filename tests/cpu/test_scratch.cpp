// cpu::Scratch, the kernels' working memory: counted in memory_stats() while it lives, grown only
// when a resize needs more, moved without a copy, and served again from the block cache.
#include <doctest/doctest.h>

#include <utility>

#include "mdl.h"
#include "cpu/block_cache.h"
#include "cpu/scratch.h"
#include "switches/list/toggles.h"

using namespace mdl;

TEST_CASE("cpu scratch: counted while alive, kept by a smaller resize, moved without a copy") {
  const int64_t live0 = memory_stats().live_bytes;
  {
    cpu::Scratch<float> s(1000, 2.5f);
    CHECK(s.size() == 1000);
    CHECK(s[0] == 2.5f);
    CHECK(s[999] == 2.5f);
    CHECK(memory_stats().live_bytes == live0 + 4000);
    float* p = s.data();
    s.resize(10);  // fits: same block, same values
    CHECK(s.size() == 10);
    CHECK(s.data() == p);
    CHECK(s[9] == 2.5f);
    s.resize(2000);  // grows: a new block, the old one returned
    CHECK(s.size() == 2000);
    CHECK(memory_stats().live_bytes == live0 + 8000);
    cpu::Scratch<float> t(std::move(s));
    CHECK(s.empty());
    CHECK(s.data() == nullptr);
    CHECK(t.size() == 2000);
    CHECK(memory_stats().live_bytes == live0 + 8000);
    cpu::Scratch<float> u;
    u = std::move(t);
    CHECK(u.size() == 2000);
    CHECK(memory_stats().live_bytes == live0 + 8000);
  }
  CHECK(memory_stats().live_bytes == live0);
  cpu::Scratch<uint16_t> empty(0);
  CHECK(empty.empty());
}

TEST_CASE("cpu scratch: a freed block of 64 KiB comes back from the cache to the next call") {
  const bool was = toggles::cpu_block_cache();
  toggles::set_cpu_block_cache(false);  // start empty
  toggles::set_cpu_block_cache(true);
  const void* first = nullptr;
  {
    cpu::Scratch<float> a(16 * 1024);
    first = a.data();
  }  // 64 KiB
  const int64_t hits = cpu_cache::stats().hits;
  {
    cpu::Scratch<float> b(16 * 1024);
    CHECK(b.data() == first);
  }
  CHECK(cpu_cache::stats().hits == hits + 1);
  toggles::set_cpu_block_cache(was);
}
