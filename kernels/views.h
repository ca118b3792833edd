// The views and copies a backend makes of its operands inside a kernel, built on the tensor core
// (make_view, make_tensor) and the copy stub, so backends need nothing from the ops layer above.
#pragma once
#include <utility>

#include "kernels/core.h"

namespace mdl::kernels {

// x (contiguous) seen with another shape of the same element count.
inline Tensor view_contiguous(const Tensor& x, const Shape& shape) {
  MDL_CHECK(x.is_contiguous() && shape_numel(shape) == x.numel(), "view_contiguous: shape ", shape_str(shape),
            " does not fit contiguous ", shape_str(x.shape()));
  return make_view(x, shape, contiguous_strides(shape), x.offset());
}

// x with dims a and b swapped (no copy).
inline Tensor transposed(const Tensor& x, int64_t a, int64_t b) {
  Shape shape = x.shape(), strides = x.strides();
  std::swap(shape[size_t(a)], shape[size_t(b)]);
  std::swap(strides[size_t(a)], strides[size_t(b)]);
  return make_view(x, shape, strides, x.offset());
}

// x with a dim of size 1 inserted at d.
inline Tensor unsqueezed(const Tensor& x, int64_t d) {
  Shape shape = x.shape(), strides = x.strides();
  const int64_t stride = d < x.dim() ? x.stride(d) * x.size(d) : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return make_view(x, shape, strides, x.offset());
}

// t's storage with t's strides but another shape, and stride 0 along zero_dim when it is >= 0:
// the index kernels walk an operand over the index's shape this way.
inline Tensor restride(const Tensor& t, const Shape& shape, int64_t zero_dim = -1) {
  Shape strides = t.strides();
  if (zero_dim >= 0) strides[size_t(zero_dim)] = 0;
  return make_view(t, shape, strides, t.offset());
}

// s with dim's size set to n.
inline Shape with_size(Shape s, int64_t dim, int64_t n) {
  s[size_t(dim)] = n;
  return s;
}

// x itself when contiguous, else a contiguous copy on x's device.
inline Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel()) copy(x.device(), out, x);
  return out;
}

// x itself when dense in memory format f, else a copy in f on x's device.
inline Tensor contiguous(const Tensor& x, MemoryFormat f) {
  if (x.is_contiguous(f)) return x;
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device(), f);
  if (out.numel()) copy(x.device(), out, x);
  return out;
}

// A contiguous tensor of t's shape for a kernel to write when t itself is not contiguous (a
// channels-last result of a kernel that writes (N, C, H, W)); t itself otherwise, undefined if t is.
inline Tensor contiguous_target(const Tensor& t) {
  return !t.defined() || t.is_contiguous() ? t : make_tensor(t.shape(), t.dtype(), t.device());
}
// Copies what a kernel wrote into `target` back to t, when they differ.
inline void copy_from_target(const Tensor& t, const Tensor& target) {
  if (t.defined() && !t.is_same(target) && t.numel()) copy(t.device(), t, target);
}

}  // namespace mdl::kernels
