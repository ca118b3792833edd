// View, copy and joining ops with their backward: views route the gradient back through the
// inverse view; cat splits it; casts cast it back.
#include <numeric>

#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "ops/autocast.h"
#include "ops/ops.h"

namespace mdl {

MDL_DIFFERENTIABLE_OPS("view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "expand", "slice", "narrow",
                       "select", "clone", "to_dtype", "to_device", "cat", "split", "tril", "triu");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

namespace {
// Views whose backward is "reshape the gradient to the input's shape".
Tensor reshape_like_grad(const char* name, const Tensor& x, Tensor out) {
  record_fn(name, {x}, {out}, {},
            [s = x.shape()](const Grads& g, const FnNode&) { return Grads{native::reshape(g[0], s)}; });
  return out;
}

// Views that pick a sub-block: the gradient is zeros with g copied into the same sub-block.
template <class MakeView>
Tensor subview(const char* name, const Tensor& x, MakeView make) {
  Tensor out = make(x);
  record_fn(name, {x}, {out}, {}, [s = x.shape(), make](const Grads& g, const FnNode&) {
    Tensor gx = zeros(s, {g[0].dtype(), g[0].device()});
    native::copy_(make(gx), g[0]);
    return Grads{gx};
  });
  return out;
}
}  // namespace

Tensor view(const Tensor& x, const Shape& s) { return reshape_like_grad("view", x, native::view(x, s)); }
Tensor reshape(const Tensor& x, const Shape& s) { return reshape_like_grad("reshape", x, native::reshape(x, s)); }
Tensor flatten(const Tensor& x, int64_t a, int64_t b) {
  return reshape_like_grad("reshape", x, native::flatten(x, a, b));
}
Tensor squeeze(const Tensor& x) { return reshape_like_grad("squeeze", x, native::squeeze(x)); }
Tensor squeeze(const Tensor& x, int64_t d) { return reshape_like_grad("squeeze", x, native::squeeze(x, d)); }
Tensor unsqueeze(const Tensor& x, int64_t d) { return reshape_like_grad("unsqueeze", x, native::unsqueeze(x, d)); }

Tensor permute(const Tensor& x, const Shape& dims) {
  Tensor out = native::permute(x, dims);
  Shape inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(wrap_dim(dims[i], x.dim(), "permute"))] = int64_t(i);
  record_fn("permute", {x}, {out}, {},
            [inverse](const Grads& g, const FnNode&) { return Grads{native::permute(g[0], inverse)}; });
  return out;
}

Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  Tensor out = native::transpose(x, a, b);
  record_fn("transpose", {x}, {out}, {},
            [a, b](const Grads& g, const FnNode&) { return Grads{native::transpose(g[0], a, b)}; });
  return out;
}

Tensor expand(const Tensor& x, const Shape& s) {
  Tensor out = native::expand(x, s);
  record_fn("expand", {x}, {out}, {},
            [xs = x.shape()](const Grads& g, const FnNode&) { return Grads{native::sum_to(g[0], xs)}; });
  return out;
}

Tensor slice(const Tensor& x, int64_t d, int64_t s, int64_t e, int64_t st) {
  return subview("slice", x, [=](const Tensor& t) { return native::slice(t, d, s, e, st); });
}
Tensor narrow(const Tensor& x, int64_t d, int64_t s, int64_t l) {
  return subview("narrow", x, [=](const Tensor& t) { return native::narrow(t, d, s, l); });
}
Tensor select(const Tensor& x, int64_t d, int64_t i) {
  return subview("select", x, [=](const Tensor& t) { return native::select(t, d, i); });
}

Tensor clone(const Tensor& x) {
  Tensor out = native::clone(x);
  record_fn("clone", {x}, {out}, {}, [](const Grads& g, const FnNode&) { return Grads{g[0]}; });
  return out;
}

Tensor contiguous(const Tensor& x, MemoryFormat f) {
  if (x.is_contiguous(f)) return x;
  Tensor out = native::contiguous(x, f);
  record_fn("clone", {x}, {out}, {}, [](const Grads& g, const FnNode&) { return Grads{g[0]}; });
  return out;
}

namespace {
// The gradient flows back in the input's dtype (FnNode casts it), e.g. f16 -> f32.
void record_to_dtype(const Tensor& x, const Tensor& out) {
  if (is_floating(out.dtype()))
    record_fn("to_dtype", {x}, {out}, {}, [](const Grads& g, const FnNode&) { return Grads{g[0]}; });
}
}  // namespace

Tensor to_dtype(const Tensor& x, DType t) {
  Tensor out = native::to_dtype(x, t);
  record_to_dtype(x, out);
  return out;
}

Tensor amp::detail::to_dtype_node(const Tensor& x, const Tensor& cast) {
  Tensor out = make_view(cast, cast.shape(), cast.strides(), cast.offset());
  record_to_dtype(x, out);
  return out;
}

Tensor to_device(const Tensor& x, Device d) {
  // Same device: an alias, never x itself, or recording would give x a grad_fn (a leaf would
  // stop being a leaf and hold itself alive through its AccumulateGrad).
  Tensor out = x.device() == d ? make_view(x, x.shape(), x.strides(), x.offset()) : native::to_device(x, d);
  record_fn("to_device", {x}, {out}, {},
            [src = x.device()](const Grads& g, const FnNode&) { return Grads{native::to_device(g[0], src)}; });
  return out;
}

// ---- joining and splitting -----------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  Tensor out = native::cat(xs, dim);
  // native::cat skips 1-D empty tensors (as PyTorch does); they get an empty gradient.
  std::vector<int64_t> sizes;
  std::vector<bool> skipped;
  for (const Tensor& x : xs) {
    skipped.push_back(x.dim() == 1 && x.numel() == 0 && out.dim() != 1);
    if (!skipped.back()) sizes.push_back(x.size(dim));
  }
  record_fn("cat", xs, {out}, {}, [sizes, skipped, dim](const Grads& g, const FnNode&) {
    std::vector<Tensor> parts = native::split_with_sizes(g[0], sizes, dim), grads;
    size_t next = 0;
    for (bool skip : skipped) grads.push_back(skip ? zeros({0}, {g[0].dtype(), g[0].device()}) : parts[next++]);
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  MDL_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  int64_t d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  for (const Tensor& x : xs)
    MDL_CHECK(x.shape() == xs[0].shape(), "stack: all tensors need the same shape, got ", shape_str(xs[0].shape()),
              " and ", shape_str(x.shape()));
  std::vector<Tensor> u;
  for (const Tensor& x : xs) u.push_back(unsqueeze(x, d));
  return cat(u, d);
}

// The parts are views of x made by one node, whose backward joins their gradients with one cat
// (a part the loss did not use joins as zeros). One narrow node per part would instead fill a
// zero tensor of x's size per part, copy each gradient in, and add the results up.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<Tensor> parts = native::split_with_sizes(x, sizes, dim);  // validates
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  record_fn("split", {x}, parts, {}, [d, s = x.shape()](const Grads& g, const FnNode&) {
    if (s[size_t(d)] == 0) return Grads{zeros(s, {g[0].dtype(), g[0].device()})};
    return Grads{native::cat(g, d)};
  });
  return parts;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  MDL_CHECK(split_size > 0 || (split_size == 0 && x.size(dim) == 0), "split: split_size must be positive, got ",
            split_size);
  const int64_t n = x.size(dim);
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  if (n == 0) sizes.push_back(0);
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  MDL_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  int64_t n = x.size(dim);
  if (n == 0) return split(x, std::vector<int64_t>(size_t(chunks), 0), dim);  // `chunks` empty parts, as PyTorch
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

Tensor tril(const Tensor& x, int64_t k) {
  Tensor out = native::tril(x, k);
  record_fn("tril", {x}, {out}, {}, [k](const Grads& g, const FnNode&) { return Grads{native::tril(g[0], k)}; });
  return out;
}

Tensor triu(const Tensor& x, int64_t k) {
  Tensor out = native::triu(x, k);
  record_fn("triu", {x}, {out}, {}, [k](const Grads& g, const FnNode&) { return Grads{native::triu(g[0], k)}; });
  return out;
}

Tensor one_hot(const Tensor& i, int64_t n) { return native::one_hot(i, n); }

}  // namespace mdl
