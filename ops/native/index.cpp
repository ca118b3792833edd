// Native selection, joining and indexing ops: where, masked_fill, cat, stack, split,
// index_select, index_add, gather, scatter_add, tril/triu and one_hot. Every index is
// range-checked here by the check_index kernel, before the op's kernel runs, with an error naming
// the bad value: at once on the CPU, at the next synchronisation on the GPU (never a host read).
#include <algorithm>

#include "ops/native/native.h"

namespace mdl::native {

namespace {

Tensor cast(const Tensor& x, DType t) { return x.dtype() == t ? x : to_dtype(x, t); }

void check_device(const char* op, const Tensor& x, const Tensor& other, const char* what) {
  MDL_CHECK(other.device() == x.device(), op, ": ", what, " is on ", other.device(), " but the input is on ",
            x.device());
}

void check_index_dtype(const char* op, const Tensor& index) {
  MDL_CHECK(index.dtype() == kI64 || index.dtype() == kI32, op, ": index must be I64 or I32, got ", index.dtype());
}

// The values of `index` as a contiguous I64 CPU tensor, for checking on the host.
Tensor host_i64(const Tensor& index) { return contiguous(cast(to_device(index, Device::cpu()), kI64)); }

// Index as I64 on its device, checked (kernels::check_index) that each value lies in [0, size).
Tensor checked_index(const char* op, const Tensor& index, int64_t dim, int64_t size) {
  check_index_dtype(op, index);
  Tensor idx = cast(index, kI64);
  kernels::check_index(idx.device(), contiguous(idx), kernels::IndexCheck{op, "index", size, dim});
  return idx;
}

// 0-dim tensors behave as 1-D tensors of one element.
Tensor at_least_1d(const Tensor& x) { return x.dim() == 0 ? view(x, {1}) : x; }

Shape with_size(Shape s, int64_t dim, int64_t n) {
  s[size_t(dim)] = n;
  return s;
}

}  // namespace

// ---- selection -----------------------------------------------------------------------------
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  MDL_CHECK(cond.dtype() == kBool, "where: condition must be bool, got ", cond.dtype());
  check_device("where", cond, a, "the first value tensor");
  check_device("where", cond, b, "the second value tensor");
  Shape s;
  try {
    s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  } catch (const Error&) {
    MDL_FAIL("where: condition shape ", shape_str(cond.shape()), " and value shapes ", shape_str(a.shape()), " and ",
             shape_str(b.shape()), " cannot be broadcast together");
  }
  DType t = result_type(a, b);
  Tensor out = make_tensor(s, t, cond.device());
  if (out.numel()) kernels::where(out.device(), out, expand(cond, s), expand(cast(a, t), s), expand(cast(b, t), s));
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  MDL_CHECK(mask.dtype() == kBool, "masked_fill: mask must be bool, got ", mask.dtype());
  check_device("masked_fill", x, mask, "the mask");
  bool fits = true;
  try {
    fits = broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape();
  } catch (const Error&) {
    fits = false;
  }
  MDL_CHECK(fits, "masked_fill: mask of shape ", shape_str(mask.shape()), " cannot be broadcast to the input's shape ",
            shape_str(x.shape()));
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  Tensor v = make_tensor({}, x.dtype(), x.device());  // value cast to x's dtype, as PyTorch does
  fill_(v, value, "masked_fill");
  kernels::where(out.device(), out, expand(mask, x.shape()), expand(v, x.shape()), x);
  return out;
}

// ---- joining and splitting ---------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  MDL_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  // As in PyTorch, 1-D empty tensors are skipped whatever their neighbours' shapes.
  auto skipped = [](const Tensor& x) { return x.dim() == 1 && x.numel() == 0; };
  const Tensor* ref = nullptr;
  DType t = xs[0].dtype();
  for (size_t i = 0; i < xs.size(); ++i) {
    MDL_CHECK(xs[i].defined(), "cat: tensor ", i, " is undefined");
    MDL_CHECK(xs[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    MDL_CHECK(xs[i].device() == xs[0].device(), "cat: expected all tensors on ", xs[0].device(), ", but tensor ", i,
              " is on ", xs[i].device());
    t = promote_types(t, xs[i].dtype());
    if (!ref && !skipped(xs[i])) ref = &xs[i];
  }
  if (!ref) ref = &xs[0];
  const int64_t d = wrap_dim(dim, ref->dim(), "cat");
  const size_t ref_i = size_t(ref - xs.data());
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (skipped(xs[i]) && ref != &xs[i]) continue;
    bool match = xs[i].dim() == ref->dim();
    for (int64_t k = 0; match && k < ref->dim(); ++k) match = k == d || xs[i].size(k) == ref->size(k);
    MDL_CHECK(match, "cat: shapes must match except in dim ", d, ", but tensor ", ref_i, " has shape ",
              shape_str(ref->shape()), " and tensor ", i, " has shape ", shape_str(xs[i].shape()));
    total += xs[i].size(d);
  }
  Tensor out = make_tensor(with_size(ref->shape(), d, total), t, ref->device());
  int64_t off = 0;
  for (const Tensor& x : xs) {
    if (skipped(x) && ref != &x) continue;
    copy_(narrow(out, d, off, x.size(d)), x);
    off += x.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  MDL_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  std::vector<Tensor> us;
  us.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    MDL_CHECK(xs[i].defined(), "stack: tensor ", i, " is undefined");
    MDL_CHECK(xs[i].shape() == xs[0].shape(), "stack: expected tensors of one shape, but tensor 0 has shape ",
              shape_str(xs[0].shape()), " and tensor ", i, " has shape ", shape_str(xs[i].shape()));
  }
  const int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  for (const Tensor& x : xs) us.push_back(unsqueeze(x, d));
  return cat(us, d);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  MDL_CHECK(x.dim() > 0, "split: expected a tensor with at least one dim, got a 0-dim tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.size(d);
  MDL_CHECK(split_size >= 0, "split: split_size must be non-negative, got ", split_size);
  MDL_CHECK(split_size > 0 || n == 0, "split: split_size 0 can only split a dim of size 0, but dim ", d, " has size ",
            n);
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(size_t(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    int64_t start = i * split_size;
    out.push_back(narrow(x, d, start, std::min(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  MDL_CHECK(x.dim() > 0, "split_with_sizes: expected a tensor with at least one dim, got a 0-dim tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    MDL_CHECK(s >= 0, "split_with_sizes: sizes must be non-negative, got ", shape_str(sizes));
    sum += s;
  }
  MDL_CHECK(sum == x.size(d), "split_with_sizes: sizes ", shape_str(sizes), " sum to ", sum, ", but dim ", d,
            " has size ", x.size(d), " (shape ", shape_str(x.shape()), ")");
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

// ---- indexing ------------------------------------------------------------------------------
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype("index_select", index);
  check_device("index_select", x, index, "the index");
  MDL_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape ", shape_str(index.shape()));
  MDL_CHECK(x.dim() > 0 || index.numel() == 1, "index_select: the index into a 0-dim tensor must hold one value, got ",
            index.numel());
  Tensor xv = at_least_1d(x);
  const int64_t d = wrap_dim(dim, xv.dim(), "index_select");
  Tensor idx = reshape(checked_index("index_select", index, d, xv.size(d)), {index.numel()});
  Tensor out = make_tensor(with_size(xv.shape(), d, index.numel()), x.dtype(), x.device());
  if (out.numel()) kernels::index_select(out.device(), out, xv, d, idx);
  return x.dim() == 0 ? view(out, {}) : out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index_dtype("index_add", index);
  check_device("index_add", x, index, "the index");
  check_device("index_add", x, src, "src");
  MDL_CHECK(index.dim() <= 1, "index_add: index must be 1-D, got shape ", shape_str(index.shape()));
  MDL_CHECK(src.dtype() == x.dtype(), "index_add: src has dtype ", src.dtype(), " but the input has dtype ", x.dtype());
  Tensor xv = at_least_1d(x), sv = at_least_1d(src);
  MDL_CHECK(sv.dim() == xv.dim(), "index_add: src of shape ", shape_str(src.shape()),
            " must have as many dims as the input of shape ", shape_str(x.shape()));
  const int64_t d = wrap_dim(dim, xv.dim(), "index_add");
  MDL_CHECK(sv.size(d) == index.numel(), "index_add: src has size ", sv.size(d), " along dim ", d,
            " but the index has ", index.numel(), " entries");
  MDL_CHECK(with_size(sv.shape(), d, 1) == with_size(xv.shape(), d, 1), "index_add: src of shape ",
            shape_str(src.shape()), " does not match the input's shape ", shape_str(x.shape()), " outside dim ", d);
  Tensor idx = reshape(checked_index("index_add", index, d, xv.size(d)), {index.numel()});
  Tensor out = make_tensor(xv.shape(), x.dtype(), x.device());
  copy_(out, xv);
  if (sv.numel()) kernels::index_add(out.device(), out, d, idx, sv);
  return x.dim() == 0 ? view(out, {}) : out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_dtype("gather", index);
  check_device("gather", x, index, "the index");
  MDL_CHECK(index.dim() == x.dim(), "gather: index of shape ", shape_str(index.shape()),
            " must have as many dims as the input of shape ", shape_str(x.shape()));
  Tensor xv = at_least_1d(x), iv = at_least_1d(index);
  const int64_t d = wrap_dim(dim, xv.dim(), "gather");
  for (int64_t k = 0; k < xv.dim(); ++k)
    MDL_CHECK(k == d || iv.size(k) <= xv.size(k), "gather: index of shape ", shape_str(index.shape()),
              " is larger than the input of shape ", shape_str(x.shape()), " in dim ", k);
  Tensor idx = checked_index("gather", iv, d, xv.size(d));
  Tensor out = make_tensor(iv.shape(), x.dtype(), x.device());
  if (out.numel()) kernels::gather(out.device(), out, xv, d, idx);
  return x.dim() == 0 ? view(out, {}) : out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index_dtype("scatter_add", index);
  check_device("scatter_add", x, index, "the index");
  check_device("scatter_add", x, src, "src");
  MDL_CHECK(src.dtype() == x.dtype(), "scatter_add: src has dtype ", src.dtype(), " but the input has dtype ",
            x.dtype());
  MDL_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), "scatter_add: index of shape ", shape_str(index.shape()),
            " and src of shape ", shape_str(src.shape()), " must have as many dims as the input of shape ",
            shape_str(x.shape()));
  Tensor xv = at_least_1d(x), iv = at_least_1d(index), sv = at_least_1d(src);
  const int64_t d = wrap_dim(dim, xv.dim(), "scatter_add");
  for (int64_t k = 0; k < xv.dim(); ++k)
    MDL_CHECK(iv.size(k) <= sv.size(k) && (k == d || iv.size(k) <= xv.size(k)), "scatter_add: index of shape ",
              shape_str(index.shape()), " is larger than src of shape ", shape_str(src.shape()),
              " or than the input of shape ", shape_str(x.shape()), " in dim ", k);
  Tensor idx = checked_index("scatter_add", iv, d, xv.size(d));
  Tensor out = make_tensor(xv.shape(), x.dtype(), x.device());
  copy_(out, xv);
  if (idx.numel()) kernels::scatter_add(out.device(), out, d, idx, sv);
  return x.dim() == 0 ? view(out, {}) : out;
}

namespace {
Tensor tri(const Tensor& x, int64_t k, bool upper) {
  const char* op = upper ? "triu" : "tril";
  MDL_CHECK(x.dim() >= 2, op, ": expected a tensor with at least 2 dims, got shape ", shape_str(x.shape()));
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel()) kernels::tri(out.device(), out, x, k, upper);
  return out;
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return tri(x, k, false); }
Tensor triu(const Tensor& x, int64_t k) { return tri(x, k, true); }

// out (..., C) I64: out[..., c] = (index[...] == c), through the scatter_add kernel.
Tensor one_hot(const Tensor& index, int64_t num_classes) {
  MDL_CHECK(is_integral(index.dtype()) && index.dtype() != kBool, "one_hot: index must be an integer tensor, got ",
            index.dtype());
  MDL_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or non-negative, got ", num_classes);
  if (index.device().is_cpu() || num_classes == -1) {  // inferring num_classes reads the values on the host
    Tensor host = host_i64(index);
    const int64_t* v = host.data_ptr<int64_t>();
    int64_t max = -1;
    for (int64_t i = 0, n = host.numel(); i < n; ++i) {
      MDL_CHECK(v[i] >= 0, "one_hot: class values must be non-negative, got ", v[i]);
      max = std::max(max, v[i]);
    }
    if (num_classes == -1) {
      MDL_CHECK(index.numel() > 0, "one_hot: cannot infer num_classes from an empty index of shape ",
                shape_str(index.shape()));
      num_classes = max + 1;
    }
    MDL_CHECK(max < num_classes, "one_hot: class value ", max, " is out of range for num_classes ", num_classes);
  } else {
    kernels::check_index(index.device(), contiguous(cast(index, kI64)),
                         kernels::IndexCheck{"one_hot", "class value", num_classes});
  }
  Shape s = index.shape();
  s.push_back(num_classes);
  Tensor out = make_tensor(s, kI64, index.device());
  fill_(out, 0.0);
  if (out.numel() == 0) return out;
  Tensor idx = unsqueeze(cast(index, kI64), -1);
  Tensor one = make_tensor({}, kI64, index.device());
  fill_(one, 1.0);
  kernels::scatter_add(out.device(), out, out.dim() - 1, idx, expand(one, idx.shape()));
  return out;
}

}  // namespace mdl::native
