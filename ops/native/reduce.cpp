// Native reductions and softmax: dims and dtypes checked, outputs allocated in keepdim form, the
// kernel called, then the reduced dims squeezed away unless keepdim. No autograd here.
#include <utility>
#include <vector>

#include "kernels/reduce_rules.h"
#include "ops/native/native.h"

namespace mdl::native {

namespace {

void check_defined(const Tensor& x, const char* op) { MDL_CHECK(x.defined(), op, ": undefined tensor"); }

// dims (empty = all, negative wraps) -> a mask over x's dims; repeats are an error.
std::vector<bool> reduce_mask(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  std::vector<bool> mask(size_t(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, x.dim(), op);
    if (x.dim() == 0) continue;  // dim 0 or -1 of a scalar names the scalar itself
    MDL_CHECK(!mask[size_t(w)], op, ": dim ", w, " appears more than once in dims ", shape_str(dims));
    mask[size_t(w)] = true;
  }
  return mask;
}

Shape keepdim_shape(const Tensor& x, const std::vector<bool>& mask) {
  Shape s = x.shape();
  for (size_t d = 0; d < s.size(); ++d)
    if (mask[d]) s[d] = 1;
  return s;
}

// out (contiguous, keepdim form) with the masked dims dropped, when !keepdim.
Tensor finish(const Tensor& out, const std::vector<bool>& mask, bool keepdim) {
  if (keepdim) return out;
  Shape s;
  for (size_t d = 0; d < mask.size(); ++d)
    if (!mask[d]) s.push_back(out.size(int64_t(d)));
  return make_view(out, s, contiguous_strides(s), out.offset());
}

void check_floating(const Tensor& x, const char* op) {
  MDL_CHECK(is_floating(x.dtype()), op, ": expected a floating dtype (f32, f16, bf16, f64), got ", x.dtype());
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  check_defined(x, reduce_op_name(op));
  return reduce(op, x, dims, keepdim, kernels::reduce_natural_dtype(op, x.dtype()));
}

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype) {
  const char* name = reduce_op_name(op);
  check_defined(x, name);
  const std::vector<bool> mask = reduce_mask(x, dims, name);
  MDL_CHECK(op != ReduceOp::Mean || is_floating(x.dtype()), name, ": cannot average a tensor of integral dtype ",
            x.dtype(), "; convert it to a floating dtype first");
  if (op == ReduceOp::Max || op == ReduceOp::Min)
    for (int64_t d = 0; d < x.dim(); ++d)
      MDL_CHECK(!mask[size_t(d)] || x.size(d) > 0, name, ": cannot reduce over dim ", d, " of size 0 (shape ",
                x.shape(), "): ", name, " of nothing is undefined");
  Tensor out = make_tensor(keepdim_shape(x, mask), out_dtype, x.device());
  kernels::reduce(x.device(), op, out, x, mask);
  return finish(out, mask, keepdim);
}

std::pair<Tensor, Tensor> max_min(bool is_max, const Tensor& x, int64_t dim, bool keepdim) {
  const char* name = is_max ? "max" : "min";
  check_defined(x, name);
  dim = wrap_dim(dim, x.dim(), name);
  if (x.dim() == 0) {  // the scalar itself, index 0
    auto [v, i] = max_min(is_max, x.view({1}), 0, keepdim);
    return {v.view({}), i.view({})};
  }
  MDL_CHECK(x.size(dim) > 0, name, ": cannot reduce over dim ", dim, " of size 0 (shape ", x.shape(), "): ", name,
            " of nothing is undefined");
  std::vector<bool> mask(size_t(x.dim()), false);
  mask[size_t(dim)] = true;
  const Shape s = keepdim_shape(x, mask);
  Tensor values = make_tensor(s, x.dtype(), x.device());
  Tensor indices = make_tensor(s, kI64, x.device());
  kernels::arg_reduce(x.device(), is_max, values, indices, x, dim);
  return {finish(values, mask, keepdim), finish(indices, mask, keepdim)};
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  check_defined(x, "var");
  check_floating(x, "var");
  const std::vector<bool> mask = reduce_mask(x, dims, "var");
  Tensor out = make_tensor(keepdim_shape(x, mask), x.dtype(), x.device());
  kernels::var(x.device(), out, x, mask, correction);
  return finish(out, mask, keepdim);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  check_defined(x, "sum_to");
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  MDL_CHECK(lead >= 0, "sum_to: cannot reduce shape ", x.shape(), " to ", shape, " (more dims)");
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    const int64_t want = shape[size_t(d - lead)];
    MDL_CHECK(want == x.size(d) || want == 1, "sum_to: cannot reduce shape ", x.shape(), " to ", shape, " (dim ", d,
              " is ", x.size(d), ", target ", want, ")");
    if (want != x.size(d)) dims.push_back(d);
  }
  Tensor r = reduce(ReduceOp::Sum, x, dims, /*keepdim=*/true);
  if (r.dtype() != x.dtype()) r = to_dtype(r, x.dtype());
  return r.view(shape);
}

Tensor softmax(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  check_defined(x, name);
  check_floating(x, name);
  dim = wrap_dim(dim, x.dim(), name);
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  kernels::softmax(x.device(), out, x, dim, log);
  return out;
}

Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  check_defined(grad_out, name);
  check_defined(out, name);
  check_floating(out, name);
  MDL_CHECK(grad_out.shape() == out.shape() && grad_out.dtype() == out.dtype() && grad_out.device() == out.device(),
            name, ": grad_output ", grad_out.shape(), " ", grad_out.dtype(), " on ", grad_out.device(),
            " does not match output ", out.shape(), " ", out.dtype(), " on ", out.device());
  dim = wrap_dim(dim, out.dim(), name);
  Tensor grad_in = make_tensor(out.shape(), out.dtype(), out.device());
  kernels::softmax_backward(out.device(), grad_in, grad_out, out, dim, log);
  return grad_in;
}

}  // namespace mdl::native
