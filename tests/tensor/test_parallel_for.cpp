// parallel_for and parallel_claims: an exception thrown in any chunk, on any thread, reaches the
// caller (OpenMP would otherwise end the program), and the next call still runs; parallel_claims
// hands every item out exactly once, to threads that each run f once.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "tensor/error.h"
#include "tensor/parallel.h"

using namespace mdl;

TEST_CASE("parallel_for: an exception in a worker thread's chunk reaches the caller") {
  const int saved = get_num_threads();
  set_num_threads(4);
  const int64_t n = 4 * kGrainSize;
  for (int64_t bad : {int64_t(0), n - 1}) {  // the first chunk runs on the caller's thread, the last on another
    CHECK_THROWS_WITH_AS(parallel_for(0, n, kGrainSize,
                                      [&](int64_t b, int64_t e) {
                                        if (b <= bad && bad < e) MDL_FAIL("element ", bad, " is bad");
                                      }),
                         doctest::Contains(("element " + std::to_string(bad) + " is bad").c_str()), Error);
  }
  std::atomic<int64_t> covered{0};
  parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) { covered += e - b; });
  CHECK(covered == n);
  set_num_threads(saved);
}

TEST_CASE("parallel_claims: every item once, each thread's f once, an exception reaches the caller") {
  const int saved = get_num_threads();
  set_num_threads(3);
  const int64_t n = 1000;
  std::vector<std::atomic<int>> seen(n);
  std::atomic<int> calls{0};
  std::mutex m;
  std::set<int> workers;
  parallel_claims(0, n, 1, [&](Claims& claims) {
    ++calls;
    {
      std::lock_guard<std::mutex> lock(m);
      CHECK(workers.insert(thread_index()).second);  // f runs once on a thread
    }
    for (int64_t i; claims.next(i);) {
      REQUIRE(i >= 0);
      REQUIRE(i < n);
      ++seen[size_t(i)];
    }
  });
  CHECK(calls == 3);
  for (int64_t i = 0; i < n; ++i) CHECK(seen[size_t(i)] == 1);

  // An offset range, and a grain that leaves it on the calling thread alone.
  std::atomic<int64_t> sum{0};
  calls = 0;
  parallel_claims(10, 20, 100, [&](Claims& claims) {
    ++calls;
    for (int64_t i; claims.next(i);) sum += i;
  });
  CHECK(calls == 1);
  CHECK(sum == 145);

  CHECK_THROWS_WITH_AS(parallel_claims(0, n, 1,
                                       [&](Claims& claims) {
                                         for (int64_t i; claims.next(i);)
                                           if (i == 500) MDL_FAIL("item ", i, " is bad");
                                       }),
                       doctest::Contains("item 500 is bad"), Error);
  parallel_claims(5, 5, 1, [&](Claims&) { FAIL("an empty range runs nothing"); });
  set_num_threads(saved);
}

TEST_CASE("Claims: a thread walks its own share in order, then takes the others' last items") {
  // Outside a parallel region thread_index() is 0: the first of three shares, [0, 3), [3, 6), [6, 10).
  Claims claims(0, 10, 3);
  std::vector<int64_t> order;
  for (int64_t i; claims.next(i);) order.push_back(i);
  CHECK(order == std::vector<int64_t>{0, 1, 2, 5, 4, 3, 9, 8, 7, 6});
  Claims own_only(0, 10, 3, /*steal=*/false);  // the balanced_threads switch off: the static share alone
  order.clear();
  for (int64_t i; own_only.next(i);) order.push_back(i);
  CHECK(order == std::vector<int64_t>{0, 1, 2});
  Claims stopped(0, 10, 2);
  stopped.stop();
  int64_t i = -1;
  CHECK_FALSE(stopped.next(i));
}

TEST_CASE("parallel_for_balanced: every item once, in pieces of at least the grain") {
  const int saved = get_num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (int64_t n : {int64_t(1), int64_t(1000), 40 * kGrainSize + 7}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<int64_t> pieces{0}, short_pieces{0};
      parallel_for_balanced(5, 5 + n, kGrainSize, [&](int64_t b, int64_t e) {
        ++pieces;
        if (e - b < kGrainSize) ++short_pieces;
        for (int64_t i = b; i < e; ++i) ++seen[size_t(i - 5)];
      });
      for (int64_t i = 0; i < n; ++i) REQUIRE(seen[size_t(i)] == 1);
      CHECK(pieces <= std::max<int64_t>(1, threads * kPiecesPerThread));
      if (n >= kGrainSize) CHECK(short_pieces == 0);
    }
  }
  set_num_threads(saved);
}
