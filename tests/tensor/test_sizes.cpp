// Sizes that cannot overflow: tensors whose element or byte count does not fit in int64 are
// refused with an mdl::Error (before any allocation, whose rounding could otherwise wrap or never
// end), the allocators refuse requests above their ceiling, and crafted IDX headers whose dims
// multiply past int64 are rejected naming the file and the dims.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "cpu/block_cache.h"
#include "data/idx.h"
#include "data/pinned.h"
#include "tests/support/data_test_util.h"
#include "mdl.h"
#include "tensor/checked_size.h"

using namespace mdl;
using namespace data_test;

namespace {
constexpr int64_t k2e32 = int64_t(1) << 32, k2e62 = int64_t(1) << 62;
}  // namespace

TEST_CASE("sizes: the checked helpers") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CHECK(checked_mul(k2e32, k2e32 / 2 - 1) == k2e32 * (k2e32 / 2 - 1));
  CHECK_FALSE(checked_mul(k2e32, k2e32));
  CHECK_FALSE(checked_mul(-1, 2));
  CHECK(checked_add(kMax - 1, 1) == kMax);
  CHECK_FALSE(checked_add(kMax, 1));
  CHECK(numel_if_fits({}) == 1);
  CHECK(numel_if_fits({k2e32, 0, 7}) == 0);
  CHECK_FALSE(numel_if_fits({k2e32, k2e32, 0}));  // a zero dim does not excuse strides that overflow
  CHECK(checked_numel({2, 3, 4}, "op") == 24);
  CHECK(checked_nbytes({2, 3}, kF64, "op") == 48);
  CHECK_THROWS_WITH_AS(checked_nbytes({k2e32, k2e32}, kF16, "op"),
                       doctest::Contains("op: shape [4294967296,4294967296] of f16 has too many elements"), Error);
  CHECK_THROWS_WITH_AS(checked_numel({1, -2}, "op"), doctest::Contains("op: negative dimension in shape [1,-2]"),
                       Error);
  CHECK(checked_round_up(0, 64, "op") == 0);
  CHECK(checked_round_up(65, 64, "op") == 128);
  CHECK_THROWS_WITH_AS(checked_round_up(kMax - 10, 64, "op"), doctest::Contains("overflows int64"), Error);
  CHECK_NOTHROW(check_alloc_bytes(size_t(kMaxAllocBytes), "op"));
  CHECK_THROWS_WITH_AS(check_alloc_bytes(size_t(kMaxAllocBytes) + 1, "op"),
                       doctest::Contains("op: refusing to allocate 281474976710657 bytes"), Error);
}

TEST_CASE("sizes: a shape whose element or byte count overflows int64 is refused") {
  // 2^32 x 2^32 elements wraps to 0: the tensor would claim numel() == 0.
  REQUIRE_THROWS_WITH_AS(zeros({k2e32, k2e32}), doctest::Contains("shape [4294967296,4294967296] of f32"), Error);
  // 3 x 2^62 bytes wraps to a size the allocator's rounding never finishes with.
  CHECK_THROWS_WITH_AS(zeros({3, k2e62}, kU8), doctest::Contains("overflows int64"), Error);
  // 2^62 elements fit; their 2^64 bytes as f32 do not.
  CHECK_THROWS_WITH_AS(zeros({k2e62}), doctest::Contains("4611686018427387904 elements x 4 bytes overflows int64"),
                       Error);
  CHECK_THROWS_WITH_AS(data::empty_pinned({k2e32, k2e32}, kF32), doctest::Contains("overflows int64"), Error);
  CHECK_THROWS_WITH_AS(zeros({2, -1}), doctest::Contains("tensor: negative dimension in shape [2,-1]"), Error);
}

TEST_CASE("sizes: views whose element count overflows int64 are refused") {
  CHECK_THROWS_WITH_AS(expand(zeros({1, 1}), {k2e32, k2e32}), doctest::Contains("overflows int64"), Error);
  CHECK_THROWS_WITH_AS(reshape(zeros({0}), {k2e32, k2e32, 0}).numel(), doctest::Contains("overflows int64"), Error);
}

TEST_CASE("sizes: the CPU allocator refuses requests above 2^48 bytes before rounding them") {
  Allocator* a = cpu_allocator();
  const int64_t live = memory_stats().live_bytes;
  REQUIRE_THROWS_WITH_AS(a->allocate(size_t(1) << 50),
                         doctest::Contains("cpu allocator: refusing to allocate 1125899906842624 bytes"), Error);
  // Rounded up to 64 bytes, this size would wrap to a 64-byte block.
  CHECK_THROWS_WITH_AS(a->allocate(std::numeric_limits<size_t>::max() - 8), doctest::Contains("above the ceiling"),
                       Error);
  CHECK(memory_stats().live_bytes == live);
  // The block cache's rounding, given a size near 2^64, ends in an error too.
  CHECK_THROWS_AS(cpu_cache::block_size(std::numeric_limits<size_t>::max() - 63), Error);
  CHECK(cpu_cache::block_size((size_t(1) << 20) + 64) == (size_t(1) << 20) + (size_t(1) << 18));
}

TEST_CASE("sizes: IDX headers whose dims overflow are rejected naming the file and the dims") {
  TempDir dir("sizes");
  // 1 x 2^17 x 2^17 x 2^30 wraps to 0 payload bytes: a 20-byte file would load as valid.
  const std::string wraps_to_zero = dir.file("wraps_to_zero");
  write_bytes(wraps_to_zero, idx_bytes({1, 131072, 131072, 1u << 30}, {}));
  REQUIRE_THROWS_WITH_AS(data::read_idx(wraps_to_zero), doctest::Contains("wraps_to_zero"), Error);
  CHECK_THROWS_WITH_AS(data::read_idx(wraps_to_zero), doctest::Contains("[1,131072,131072,1073741824]"), Error);
  write_bytes(dir.file("lbl1"), idx_bytes({1}, {3}));
  CHECK_THROWS_WITH_AS(data::IdxDataset(wraps_to_zero, dir.file("lbl1")), doctest::Contains("wraps_to_zero"), Error);

  // 2 x 5139 x 11184832 x 160465489 wraps to 128 bytes; get(0) would then ask for 2^63 + 64 bytes.
  const std::string wraps_to_128 = dir.file("wraps_to_128");
  write_bytes(wraps_to_128, idx_bytes({2, 5139, 11184832, 160465489}, std::vector<uint8_t>(128, 7)));
  REQUIRE_THROWS_WITH_AS(data::read_idx(wraps_to_128), doctest::Contains("wraps_to_128"), Error);
  write_bytes(dir.file("lbl2"), idx_bytes({2}, {3, 4}));
  CHECK_THROWS_WITH_AS(data::IdxDataset(wraps_to_128, dir.file("lbl2")),
                       doctest::Contains("[2,5139,11184832,160465489]"), Error);
}
