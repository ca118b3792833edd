// The tests' comparison itself: it catches relative errors at small magnitudes, treats NaN and
// infinities by its documented rule, and names the worst element.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

TEST_CASE("check_close: a 10% error at magnitude 1e-6 fails, rounding at that magnitude passes") {
  CHECK_FALSE(compare_close({1.1e-6}, {1e-6}, Tol{}).ok());
  CHECK_FALSE(compare_close({1.1e-6}, {1e-6}, Tol{.rtol = 1e-5, .atol = 1e-8}).ok());
  CHECK(compare_close({1e-6 * (1 + 1e-13)}, {1e-6}, Tol{}).ok());
  CHECK(compare_close({1.1e-6}, {1e-6}, Tol{.rtol = 0.2, .atol = 0}).ok());
}

TEST_CASE("check_close: NaN matches only NaN") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(compare_close({nan, 1.0}, {nan, 1.0}, kExact).ok());
  CHECK_FALSE(compare_close({nan}, {1.0}, same_tol(1e6)).ok());
  CHECK_FALSE(compare_close({1.0}, {nan}, same_tol(1e6)).ok());
}

TEST_CASE("check_close: equal infinities pass, others fail") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(compare_close({inf, -inf}, {inf, -inf}, kExact).ok());
  CHECK_FALSE(compare_close({inf}, {-inf}, same_tol(1e6)).ok());
  CHECK_FALSE(compare_close({1e300}, {inf}, same_tol(1e6)).ok());
}

TEST_CASE("check_close: the report counts the failures and names the worst by its excess over the allowance") {
  // Element 1 is off by 0.5 at magnitude 2.5; element 3 by 1e-3 at magnitude 1e-3: relatively worse.
  const Closeness r = compare_close({1, 2, 3, 2e-3}, {1, 2.5, 3, 1e-3}, Tol{.rtol = 1e-6, .atol = 1e-9});
  CHECK(r.bad == 2);
  CHECK(r.worst == 3);
  CHECK(r.got == 2e-3);
  CHECK(r.want == 1e-3);
  const std::string report = r.report("case", Tol{.rtol = 1e-6, .atol = 1e-9});
  CHECK(report.find("case: 2 of 4 elements") == 0);
  CHECK(report.find("worst at [3]") != std::string::npos);
}

TEST_CASE("check_close: values reads a strided, non-contiguous tensor in row-major order") {
  Tensor x = arange(6.0).reshape({2, 3}).t();
  CHECK(values(x) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(values(Tensor()).empty());
}
