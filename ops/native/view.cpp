// Native views (new shape/strides over the same storage) and copies (copy_, casts, clone).
#include <algorithm>
#include <numeric>
#include <optional>

#include "ops/native/native.h"
#include "tensor/checked_size.h"

namespace mdl::native {

// ---- copies -----------------------------------------------------------------------------
void copy_(const Tensor& dst, const Tensor& src) {
  MDL_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  Tensor s = src;
  if (s.shape() != dst.shape()) {
    MDL_CHECK(broadcast_shapes(s.shape(), dst.shape(), "copy_") == dst.shape(), "copy_: source shape ",
              shape_str(src.shape()), " cannot be broadcast to destination shape ", shape_str(dst.shape()));
    s = expand(s, dst.shape());
  }
  if (dst.numel() == 0) return;
  // A destination whose elements share memory (a stride-0 dimension of size > 1, an expanded view)
  // has no defined result: the GPU's threads would race on it. As PyTorch, refuse it.
  for (int64_t i = 0; i < dst.dim(); ++i)
    MDL_CHECK(dst.size(i) <= 1 || dst.stride(i) != 0, "copy_: the destination of shape ", shape_str(dst.shape()),
              " has stride 0 in dimension ", i,
              ": more than one element refers to one memory location (clone it first)");
  // Overlapping memory would be read after being written: copy through a temporary.
  if (s.storage() == dst.storage() && !(s.raw_data() == dst.raw_data() && s.strides() == dst.strides())) s = clone(s);
  Device d = dst.device().is_cuda() ? dst.device() : s.device();
  kernels::copy(d, dst, s);
}

Tensor to_dtype(const Tensor& x, DType t) {
  Tensor out = make_tensor(x.shape(), t, x.device(), x.memory_format());
  if (out.numel()) kernels::copy(x.device(), out, x);
  return out;
}

Tensor to_device(const Tensor& x, Device d) {
  if (x.device() == d) return x;
  Tensor out = make_tensor(x.shape(), x.dtype(), d, x.memory_format());
  if (out.numel()) kernels::copy(d.is_cuda() ? d : x.device(), out, x);
  return out;
}

Tensor clone(const Tensor& x) {
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel()) kernels::copy(x.device(), out, x);
  return out;
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor clone(const Tensor& x, MemoryFormat f) {
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device(), f);
  if (out.numel()) kernels::copy(x.device(), out, x);
  return out;
}

Tensor contiguous(const Tensor& x, MemoryFormat f) { return x.is_contiguous(f) ? x : clone(x, f); }

void fill_(const Tensor& x, double value, const char* op) {
  const double v = integer_value(value, x.dtype(), op);
  if (x.numel()) kernels::fill(x.device(), x, v);
}

// ---- views ------------------------------------------------------------------------------
Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MDL_CHECK(infer < 0, op, ": only one dimension can be -1 in ", shape_str(shape));
      infer = int64_t(i);
    } else {
      MDL_CHECK(out[i] >= 0, op, ": invalid dimension ", out[i], " in ", shape_str(shape));
      const std::optional<int64_t> product = checked_mul(known, out[i]);
      MDL_CHECK(product, op, ": shape ", shape_str(shape), " has an element count that overflows int64");
      known = *product;
    }
  }
  if (infer >= 0) {
    MDL_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ",
              numel);
    out[size_t(infer)] = numel / known;
  }
  MDL_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel);
  return out;
}

namespace {
// Strides for viewing (shape, strides) as new_shape without a copy, or empty when impossible:
// each run of old dims that is contiguous in memory may be split or merged freely.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
  int64_t numel = shape_numel(shape);
  if (numel == 0 || shape.empty()) return contiguous_strides(new_shape);
  Shape out(new_shape.size());
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[size_t(d)];
    // End of a contiguous chunk: the old dim before d is not laid out just outside d.
    if (d == 0 || (shape[size_t(d - 1)] != 1 && strides[size_t(d - 1)] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[size_t(view_d)] == 1)) {
        out[size_t(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_shape[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[size_t(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}
}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  Shape s = infer_shape(shape, x.numel(), "view");
  auto st = view_strides(x.shape(), x.strides(), s);
  MDL_CHECK(st, "view: shape ", shape_str(shape), " is not compatible with the strides ", shape_str(x.strides()),
            " of a tensor of shape ", shape_str(x.shape()), " (use reshape, which copies)");
  return make_view(x, s, *st, x.offset());
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape s = infer_shape(shape, x.numel(), "reshape");
  if (auto st = view_strides(x.shape(), x.strides(), s)) return make_view(x, s, *st, x.offset());
  return view(clone(x), s);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  int64_t a = wrap_dim(start_dim, x.dim(), "flatten"), b = wrap_dim(end_dim, x.dim(), "flatten");
  if (x.dim() == 0) return reshape(x, {1});
  MDL_CHECK(a <= b, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape s(x.shape().begin(), x.shape().begin() + a);
  int64_t n = 1;
  for (int64_t d = a; d <= b; ++d) n *= x.size(d);
  s.push_back(n);
  s.insert(s.end(), x.shape().begin() + b + 1, x.shape().end());
  return reshape(x, s);
}

Tensor permute(const Tensor& x, const Shape& dims) {
  MDL_CHECK(int64_t(dims.size()) == x.dim(), "permute: ", dims.size(), " dims given for a tensor of shape ",
            shape_str(x.shape()));
  Shape s(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x.dim(), "permute");
    MDL_CHECK(!seen[size_t(d)], "permute: dim ", d, " repeated in ", shape_str(dims));
    seen[size_t(d)] = true;
    s[i] = x.size(d);
    st[i] = x.stride(d);
  }
  return make_view(x, s, st, x.offset());
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  if (x.dim() == 0) {  // dims 0 and -1 name a 0-d tensor's one place, as PyTorch
    (void)wrap_dim(d0, 1, "transpose");
    (void)wrap_dim(d1, 1, "transpose");
    return make_view(x, {}, {}, x.offset());
  }
  int64_t a = wrap_dim(d0, x.dim(), "transpose"), b = wrap_dim(d1, x.dim(), "transpose");
  Shape s = x.shape(), st = x.strides();
  std::swap(s[size_t(a)], s[size_t(b)]);
  std::swap(st[size_t(a)], st[size_t(b)]);
  return make_view(x, s, st, x.offset());
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  MDL_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = x.size(d);
  auto clampi = [n](int64_t i) {
    if (i < 0) i += n;
    return std::clamp<int64_t>(i, 0, n);
  };
  start = clampi(start);
  end = std::max(start, clampi(end));
  Shape s = x.shape(), st = x.strides();
  s[size_t(d)] = (end - start + step - 1) / step;
  st[size_t(d)] *= step;
  return make_view(x, s, st, x.offset() + start * x.stride(d));
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  int64_t n = x.size(d);
  if (start < 0) start += n;
  MDL_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start ", start, " and length ", length,
            " out of range for dim ", d, " of size ", n, " (shape ", shape_str(x.shape()), ")");
  Shape s = x.shape();
  s[size_t(d)] = length;
  return make_view(x, s, x.strides(), x.offset() + start * x.stride(d));
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  int64_t d = wrap_dim(dim, x.dim(), "select");
  int64_t n = x.size(d);
  MDL_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  Shape s = x.shape(), st = x.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return make_view(x, s, st, x.offset() + index * x.stride(d));
}

Tensor squeeze(const Tensor& x) {
  Shape s, st;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1) {
      s.push_back(x.size(d));
      st.push_back(x.stride(d));
    }
  return make_view(x, s, st, x.offset());
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) {
    (void)wrap_dim(dim, 1, "squeeze");
    return make_view(x, {}, {}, x.offset());
  }
  int64_t d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.size(d) != 1) return make_view(x, x.shape(), x.strides(), x.offset());
  Shape s = x.shape(), st = x.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return make_view(x, s, st, x.offset());
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape(), st = x.strides();
  int64_t stride = d < x.dim() ? x.stride(d) * x.size(d) : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return make_view(x, s, st, x.offset());
}

Tensor expand(const Tensor& x, const Shape& shape) {
  MDL_CHECK(shape.size() >= size_t(x.dim()), "expand: cannot expand shape ", shape_str(x.shape()), " to ",
            shape_str(shape), " (fewer dims)");
  size_t lead = shape.size() - size_t(x.dim());
  Shape s(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      MDL_CHECK(shape[i] >= 0, "expand: -1 or a negative size ", shape[i], " is not allowed in a new leading dim of ",
                shape_str(shape));
      s[i] = shape[i];
      st[i] = 0;
      continue;
    }
    int64_t have = x.size(int64_t(i - lead));
    int64_t want = shape[i] == -1 ? have : shape[i];
    MDL_CHECK(want == have || have == 1, "expand: the size ", have, " of dim ", i - lead, " of shape ",
              shape_str(x.shape()), " cannot be expanded to ", shape_str(shape));
    s[i] = want;
    st[i] = want == have ? x.stride(int64_t(i - lead)) : 0;
  }
  return make_view(x, s, st, x.offset());
}

}  // namespace mdl::native
