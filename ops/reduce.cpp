// Reductions and softmax with their backward: sums broadcast the gradient back, max/min route
// it to the chosen element, var uses 2(x - mean)/(N - correction), softmax has its own kernel.
#include <algorithm>

#include "ops/autocast.h"
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl {

MDL_DIFFERENTIABLE_OPS("sum", "mean", "max", "min", "max_dim", "min_dim", "var", "std", "softmax", "log_softmax");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

namespace {
// The reduced dims, wrapped and sorted (all dims when `dims` is empty).
std::vector<int64_t> reduced_dims(const Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> r;
  if (dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) r.push_back(d);
  } else {
    for (int64_t d : dims) r.push_back(wrap_dim(d, x.dim(), "reduce"));
  }
  std::sort(r.begin(), r.end());
  return r;
}

// Gradient of a reduction output, viewed with the reduced dims kept (size 1), expanded to x.
Tensor expand_back(const Tensor& g, const Shape& x_shape, const std::vector<int64_t>& rdims, bool keepdim) {
  Tensor k = g;
  if (!keepdim)
    for (int64_t d : rdims) k = native::unsqueeze(k, d);
  return native::expand(k, x_shape);
}

int64_t count(const Shape& s, const std::vector<int64_t>& rdims) {
  int64_t n = 1;
  for (int64_t d : rdims) n *= s[size_t(d)];
  return n;
}
}  // namespace

Tensor sum(const Tensor& x) { return sum(x, {}, false); }
Tensor sum(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
  auto [x] = amp::autocast_f32(x_in);
  Tensor out = native::reduce(ReduceOp::Sum, x, dims, keepdim);
  auto rd = reduced_dims(x, dims);
  record_fn("sum", {x}, {out}, {}, [s = x.shape(), rd, keepdim](const Grads& g, const FnNode&) {
    return Grads{expand_back(g[0], s, rd, keepdim)};
  });
  return out;
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }
Tensor mean(const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim) {
  auto [x] = amp::autocast_f32(x_in);
  Tensor out = native::reduce(ReduceOp::Mean, x, dims, keepdim);
  auto rd = reduced_dims(x, dims);
  record_fn("mean", {x}, {out}, {}, [s = x.shape(), rd, keepdim](const Grads& g, const FnNode&) {
    return Grads{expand_back(g[0] / double(std::max<int64_t>(count(s, rd), 1)), s, rd, keepdim)};
  });
  return out;
}

namespace {
// max()/min() over all elements: the gradient is shared evenly among the tied extremes; a NaN
// result's among the NaNs (x == NaN holds nowhere), as PyTorch's.
Tensor extreme_all(ReduceOp op, const char* name, const Tensor& x) {
  Tensor out = native::reduce(op, x, {}, false);
  record_fn(name, {x}, {out}, {x, out}, [](const Grads& g, const FnNode& n) {
    Tensor x = n.saved(0), extreme = n.saved(1);
    // Decided on the device: no wait for the GPU, and a CUDA Graph can capture it.
    Tensor hit = native::to_dtype(native::where(ne(extreme, extreme), ne(x, x), eq(x, extreme)), g[0].dtype());
    return Grads{hit * (g[0] / native::reduce(ReduceOp::Sum, hit, {}, false))};
  });
  return out;
}

std::pair<Tensor, Tensor> extreme_dim(bool is_max, const char* name, const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = native::max_min(is_max, x, dim, keepdim);
  int64_t d = wrap_dim(dim, x.dim(), name);
  record_fn(name, {x}, {values}, {indices}, [s = x.shape(), d, keepdim](const Grads& g, const FnNode& n) {
    Tensor idx = n.saved(0), gv = g[0];
    if (!keepdim && !s.empty()) {
      idx = native::unsqueeze(idx, d);
      gv = native::unsqueeze(gv, d);
    }
    Tensor zero = zeros(s, {gv.dtype(), gv.device()});
    if (s.empty()) return Grads{native::reshape(gv, s)};
    return Grads{native::scatter_add(zero, d, idx, gv)};
  });
  return {values, indices};
}
}  // namespace

Tensor max(const Tensor& x) { return extreme_all(ReduceOp::Max, "max", x); }
Tensor min(const Tensor& x) { return extreme_all(ReduceOp::Min, "min", x); }
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t d, bool k) { return extreme_dim(true, "max_dim", x, d, k); }
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t d, bool k) { return extreme_dim(false, "min_dim", x, d, k); }
Tensor argmax(const Tensor& x, int64_t d, bool k) { return native::max_min(true, x, d, k).second; }
Tensor argmin(const Tensor& x, int64_t d, bool k) { return native::max_min(false, x, d, k).second; }

namespace {
// d var / dx for a gradient g_var of var's output: g_var * 2 (x - mean) / (count - correction).
Tensor var_backward(const Tensor& g_var, const Tensor& x, const std::vector<int64_t>& rd, int64_t correction,
                    bool keepdim) {
  double denom = double(count(x.shape(), rd) - correction);
  Tensor centered = x - native::reduce(ReduceOp::Mean, x, rd, true);
  return expand_back(g_var, x.shape(), rd, keepdim) * centered * (2.0 / denom);
}
}  // namespace

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  Tensor out = native::var(x, dims, correction, keepdim);
  auto rd = reduced_dims(x, dims);
  record_fn("var", {x}, {out}, {x}, [rd, correction, keepdim](const Grads& g, const FnNode& n) {
    return Grads{var_backward(g[0], n.saved(0), rd, correction, keepdim)};
  });
  return out;
}

// sqrt(var) as one node: where the deviation is 0 (a constant row, one element) the gradient is
// 0, as PyTorch's, where sqrt's g / (2 std) would be inf and then NaN at every element.
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  Tensor out = native::unary(UnaryOp::Sqrt, native::var(x, dims, correction, keepdim));
  auto rd = reduced_dims(x, dims);
  record_fn("std", {x}, {out}, {x, out}, [rd, correction, keepdim](const Grads& g, const FnNode& n) {
    Tensor s = n.saved(1);
    Tensor g_var = native::masked_fill(g[0] / (s * 2.0), eq(s, native::scalar_like(0.0, s)), 0.0);
    return Grads{var_backward(g_var, n.saved(0), rd, correction, keepdim)};
  });
  return out;
}

namespace {
Tensor softmax_op(const char* name, const Tensor& x_in, int64_t dim, bool log) {
  auto [x] = amp::autocast_f32(x_in);
  Tensor out = native::softmax(x, dim, log);
  record_fn(name, {x}, {out}, {out}, [dim, log](const Grads& g, const FnNode& n) {
    return Grads{native::softmax_backward(g[0], n.saved(0), dim, log)};
  });
  return out;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

}  // namespace mdl
