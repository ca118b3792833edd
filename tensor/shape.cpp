// Shape and stride helpers.
#include "tensor/shape.h"

#include <sstream>

#include "tensor/checked_size.h"
#include "tensor/error.h"

namespace mdl {

int64_t shape_numel(const Shape& s) { return checked_numel(s, "numel"); }

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::ostringstream r;
  r << "[";
  for (size_t i = 0; i < s.size(); ++i) r << (i ? "," : "") << s[i];
  r << "]";
  return r.str();
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MDL_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
              " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  MDL_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " out of range for a tensor of ", ndim, " dims (expected ", lo,
            "..", hi, ")");
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

}  // namespace mdl
