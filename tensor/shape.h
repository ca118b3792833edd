// Shape and stride helpers: numel, contiguous strides, broadcasting, dim wrapping, printing.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mdl {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2,3]"
// NumPy broadcasting of two shapes; throws naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps dim in [-ndim, ndim) to [0, ndim); throws naming `op` otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace mdl

namespace std {
inline ostream& operator<<(ostream& s, const mdl::Shape& shape) { return s << mdl::shape_str(shape); }
}  // namespace std
