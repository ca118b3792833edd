// FastDivmod, the GPU strided kernels' division by a dimension's size, against / and % : every
// divisor up to 4096 and random ones up to 2^31 - 1, at the numerators where a wrong magic number
// shows first (multiples of the divisor and their neighbours, the top of the range), and a sweep.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_divmod.h"

using mdl::FastDivmod;
using mdl::kFastDivmodLimit;

namespace {

// The first wrong numerator for d among the edges and `extra` random ones; 0 with none wrong (0 itself
// is always checked first).
int64_t first_wrong(uint32_t d, std::mt19937& rng, int extra) {
  const FastDivmod f(d);
  std::vector<uint32_t> ns{0, 1, d - 1, d, kFastDivmodLimit, kFastDivmodLimit - 1, kFastDivmodLimit - d + 1};
  const uint32_t top = kFastDivmodLimit / d;  // the largest quotient
  for (uint32_t k : {uint32_t(1), uint32_t(2), top / 2 + 1, top - 1, top})
    if (k >= 1 && k <= top) {
      const uint32_t m = k * d;
      ns.insert(ns.end(), {m - 1, m});
      if (m < kFastDivmodLimit) ns.push_back(m + 1);
    }
  std::uniform_int_distribution<uint32_t> any(0, kFastDivmodLimit);
  for (int i = 0; i < extra; ++i) ns.push_back(any(rng));
  for (uint32_t n : ns) {
    if (n > kFastDivmodLimit) continue;
    const uint32_t q = f.div(n);
    if (q != n / d || f.mod(n, q) != n % d) return n == 0 ? -1 : int64_t(n);
  }
  return 0;
}

}  // namespace

TEST_CASE("fast_divmod: every divisor up to 4096") {
  std::mt19937 rng(7);
  for (uint32_t d = 1; d <= 4096; ++d) {
    const int64_t wrong = first_wrong(d, rng, 64);
    if (wrong) FAIL_CHECK("divisor ", d, ": wrong at numerator ", wrong);
  }
}

TEST_CASE("fast_divmod: large divisors, powers of two and their neighbours") {
  std::mt19937 rng(11);
  std::vector<uint32_t> ds{kFastDivmodLimit, kFastDivmodLimit - 1, 46341, 65535, 65536, 65537, 1000003};
  for (int s = 12; s < 31; ++s) ds.insert(ds.end(), {(1u << s) - 1, 1u << s, (1u << s) + 1});
  std::uniform_int_distribution<uint32_t> any(1, kFastDivmodLimit);
  for (int i = 0; i < 20000; ++i) ds.push_back(any(rng));
  for (uint32_t d : ds) {
    const int64_t wrong = first_wrong(d, rng, 16);
    if (wrong) FAIL_CHECK("divisor ", d, ": wrong at numerator ", wrong);
  }
}

TEST_CASE("fast_divmod: a sweep of numerators, and the magic numbers of a few divisors") {
  for (uint32_t d : {3u, 7u, 28u, 641u, 1000003u}) {
    const FastDivmod f(d);
    uint32_t bad = 0;
    for (uint32_t n = 0; n < (1u << 21); ++n) bad += f.div(n) != n / d;
    CHECK_MESSAGE(bad == 0, "divisor ", d);
  }
  CHECK(FastDivmod(1).shift == 0);
  CHECK(FastDivmod(1).multiplier == 1);
  CHECK(FastDivmod(64).shift == 6);
  CHECK(FastDivmod(64).multiplier == 1);
  CHECK(FastDivmod(3).shift == 2);
  CHECK(FastDivmod(3).multiplier == 1431655766u);  // floor(2^32 / 3) + 1
  CHECK(FastDivmod(kFastDivmodLimit).shift == 31);
}
