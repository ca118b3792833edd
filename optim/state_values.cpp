// finite_value, count_value and parse_index: std::from_chars and explicit range checks, so no
// conversion is ever undefined.
#include "optim/state_values.h"

#include <charconv>
#include <cmath>

#include "tensor/error.h"

namespace mdl::optim {
namespace {

void check_one_value(const Tensor& t, const std::string& what) {
  MDL_CHECK(t.defined(), what, " is undefined");
  MDL_CHECK(t.numel() == 1, what, " should hold one value, got shape ", t.shape());
}

}  // namespace

double finite_value(const Tensor& t, const std::string& what) {
  check_one_value(t, what);
  const double v = t.to(kF64).item<double>();
  MDL_CHECK(std::isfinite(v), what, " is ", v, "; expected a finite number");
  return v;
}

int64_t count_value(const Tensor& t, const std::string& what, int64_t lo, int64_t hi) {
  check_one_value(t, what);
  int64_t n = 0;
  if (is_floating(t.dtype())) {
    const double v = t.to(kF64).item<double>();
    // 2^63 is the first double past int64_t's range; the cast below is defined only inside it.
    MDL_CHECK(std::isfinite(v) && v == std::floor(v) && v >= -0x1p63 && v < 0x1p63, what, " is ", v,
              "; expected a whole number from ", lo, " to ", hi);
    n = int64_t(v);
  } else {
    n = t.to(kI64).item<int64_t>();
  }
  MDL_CHECK(n >= lo && n <= hi, what, " is ", n, "; expected a whole number from ", lo, " to ", hi);
  return n;
}

int64_t parse_index(std::string_view text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return -1;
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  return ec == std::errc() && p == end ? v : -1;
}

}  // namespace mdl::optim
