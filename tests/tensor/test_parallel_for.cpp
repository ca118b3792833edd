// parallel_for: an exception thrown in any chunk, on any thread, reaches the caller (OpenMP
// would otherwise end the program), and the next parallel_for still runs.
#include <doctest/doctest.h>

#include <atomic>

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
