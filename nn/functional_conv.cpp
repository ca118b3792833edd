// nn::functional linear, conv2d and pooling: argument checks and output shapes, then the kernels
// of tensor/kernels_conv.h (and our GEMM through matmul for linear), each backward recorded right
// beside its forward as one node. f16/bf16 convs run in f32 and round the result once on the CPU;
// on CUDA cuDNN takes them as they are (f32 compute).
#include <string>

#include "amp/autocast.h"
#include "autograd/function.h"
#include "nn/functional.h"
#include "tensor/kernels_conv.h"
#include "tensor/native.h"
#include "tensor/ops.h"

namespace mdl::nn::functional {

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

namespace {

Shape pair(Pair p) { return {p[0], p[1]}; }
std::string hw(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }
Tensor as(const Tensor& x, DType t) { return !x.defined() || x.dtype() == t ? x : native::to_dtype(x, t); }

void check_floating(const char* op, const char* what, const Tensor& t) {
  MDL_CHECK(t.is_floating_point(), op, ": expected a floating ", what, " (f32, f16, bf16, f64), got ", t.dtype(),
            " of shape ", t.shape());
}

// Checks a parameter (weight or bias) against the input x: same dtype and device.
void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x) {
  MDL_CHECK(p.dtype() == x.dtype(), op, ": ", what, " ", p.shape(), " is ", p.dtype(), " but the input ", x.shape(),
            " is ", x.dtype());
  MDL_CHECK(p.device() == x.device(), op, ": ", what, " ", p.shape(), " is on ", p.device(), " but the input ",
            x.shape(), " is on ", x.device());
}

void check_bias(const char* op, const Tensor& b, int64_t n, const Tensor& x) {
  if (!b.defined()) return;
  MDL_CHECK(b.dim() == 1 && b.size(0) == n, op, ": bias of shape ", b.shape(), " should be [", n, "]");
  check_param(op, "bias", b, x);
}

// Calls f on x as (N, C, H, W): a 3-D (C, H, W) input runs as a batch of one.
template <class F>
Tensor batched_4d(const char* op, const Tensor& x, const F& f) {
  MDL_CHECK(x.defined(), op, ": the input is undefined");
  MDL_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
            x.shape());
  if (x.dim() == 3) return squeeze(f(unsqueeze(x, 0)), 0);
  return f(x);
}

// The storage dtype a conv kernel runs on: f64 stays f64; f16/bf16 stay as they are on CUDA (cuDNN
// computes in f32 on tensor cores) and run in f32 on the CPU.
DType conv_dtype(DType t, Device d) { return t == kF64 ? kF64 : d.is_cuda() ? t : kF32; }

}  // namespace

// ---- linear ---------------------------------------------------------------------------------

// x (*, in) -> (M, in) @ w^T (in, out) + b, with M the product of the leading dims.
Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  auto [x, w, b] = amp::autocast_lower(x_in, w_in, b_in);
  MDL_CHECK(x.defined() && w.defined(), "linear: undefined input or weight");
  MDL_CHECK(x.dim() >= 1, "linear: expected an input of at least 1 dim, got shape ", x.shape());
  MDL_CHECK(w.dim() == 2, "linear: expected a 2-D weight (out, in), got shape ", w.shape());
  check_floating("linear", "input", x);
  check_param("linear", "weight", w, x);
  const int64_t in = w.size(1), out_f = w.size(0);
  MDL_CHECK(x.size(-1) == in, "linear: input ", x.shape(), " has ", x.size(-1), " features but weight ", w.shape(),
            " expects ", in);
  check_bias("linear", b, out_f, x);
  const Shape xs = x.shape();
  Shape os(xs.begin(), xs.end() - 1);
  const int64_t M = shape_numel(os);
  os.push_back(out_f);
  Tensor y = native::matmul(native::reshape(x, {M, in}), native::transpose(w, 0, 1));  // (M, out)
  if (b.defined() && y.numel()) kernels::binary(x.device(), BinaryOp::Add, y, y, native::expand(b, y.shape()));
  Tensor out = native::view(y, os);
  record_fn("linear", {x, w, b}, {out}, {x, w}, [xs, M, in, out_f](const Grads& g, const FnNode& n) {
    const Tensor x = n.saved(0), w = n.saved(1);
    const Tensor g2 = native::reshape(as(g[0], x.dtype()), {M, out_f});  // (M, out)
    Grads r(3);
    if (n.needs(0)) r[0] = native::reshape(native::matmul(g2, w), xs);
    if (n.needs(1)) r[1] = native::matmul(native::transpose(g2, 0, 1), native::reshape(x, {M, in}));
    if (n.needs(2)) r[2] = native::reduce(ReduceOp::Sum, g2, {0}, false);
    return r;
  });
  return out;
}

// ---- conv2d ---------------------------------------------------------------------------------

Tensor conv2d(const Tensor& input_in, const Tensor& w_in, const Tensor& b_in, Pair stride, Pair padding, Pair dilation,
              int64_t groups) {
  auto [input, w, b] = amp::autocast_lower(input_in, w_in, b_in);
  return batched_4d("conv2d", input, [&](const Tensor& x) {
    MDL_CHECK(w.defined(), "conv2d: the weight is undefined");
    MDL_CHECK(w.dim() == 4, "conv2d: expected a 4-D weight (C_out, C_in/groups, kH, kW), got shape ", w.shape());
    check_floating("conv2d", "input", x);
    check_param("conv2d", "weight", w, x);
    MDL_CHECK(groups > 0, "conv2d: groups must be positive, got ", groups);
    MDL_CHECK(stride[0] > 0 && stride[1] > 0, "conv2d: stride must be positive, got ", pair(stride));
    MDL_CHECK(dilation[0] > 0 && dilation[1] > 0, "conv2d: dilation must be positive, got ", pair(dilation));
    MDL_CHECK(padding[0] >= 0 && padding[1] >= 0, "conv2d: padding must be non-negative, got ", pair(padding));
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t Cout = w.size(0), kh = w.size(2), kw = w.size(3);
    MDL_CHECK(w.size(1) > 0 && kh > 0 && kw > 0, "conv2d: weight ", w.shape(), " has an empty input-channel or kernel dim");
    MDL_CHECK(Cout % groups == 0, "conv2d: weight ", w.shape(), " has ", Cout, " output channels, which groups=", groups,
              " does not divide");
    MDL_CHECK(C == w.size(1) * groups, "conv2d: input ", x.shape(), " has ", C, " channels but weight ", w.shape(),
              " expects ", w.size(1) * groups, " (groups=", groups, ")");
    check_bias("conv2d", b, Cout, x);
    const int64_t ekh = dilation[0] * (kh - 1) + 1, ekw = dilation[1] * (kw - 1) + 1;
    const int64_t Hp = H + 2 * padding[0], Wp = W + 2 * padding[1];
    MDL_CHECK(ekh <= Hp && ekw <= Wp, "conv2d: kernel ", hw(kh, kw), " (", hw(ekh, ekw), " dilated) is larger than the ",
              "padded input ", hw(Hp, Wp), " (input ", x.shape(), ", padding ", pair(padding), ")");
    const int64_t Ho = (Hp - ekh) / stride[0] + 1, Wo = (Wp - ekw) / stride[1] + 1;
    const kernels::Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};

    const DType ct = conv_dtype(x.dtype(), x.device());
    Tensor out = make_tensor({N, Cout, Ho, Wo}, ct, x.device());
    kernels::conv2d_forward(x.device(), out, as(x, ct), as(w, ct), as(b, ct), p);
    Tensor y = as(out, x.dtype());
    record_fn("conv2d", {x, w, b}, {y}, {x, w}, [p, ct, Cout](const Grads& g, const FnNode& n) {
      const Tensor x = as(n.saved(0), ct), w = as(n.saved(1), ct);
      Grads r(3);
      if (n.needs(0)) r[0] = make_tensor(x.shape(), ct, x.device());
      if (n.needs(1)) r[1] = make_tensor(w.shape(), ct, x.device());
      if (n.needs(2)) r[2] = make_tensor({Cout}, ct, x.device());
      kernels::conv2d_backward(x.device(), r[0], r[1], r[2], as(g[0], ct), x, w, p);
      return r;  // cast back to each input's dtype by the node
    });
    return y;
  });
}

// ---- pooling --------------------------------------------------------------------------------

namespace {

// Checks a pooling window against x (N, C, H, W) and gives its parameters; stride {0, 0} = kernel.
kernels::Pool2dParams pool_params(const char* op, const Tensor& x, Pair kernel, Pair stride, Pair padding) {
  check_floating(op, "input", x);
  MDL_CHECK(kernel[0] > 0 && kernel[1] > 0, op, ": kernel size must be positive, got ", pair(kernel));
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  MDL_CHECK(stride[0] > 0 && stride[1] > 0, op, ": stride must be positive, got ", pair(stride));
  MDL_CHECK(padding[0] >= 0 && padding[1] >= 0 && 2 * padding[0] <= kernel[0] && 2 * padding[1] <= kernel[1], op,
            ": padding ", pair(padding), " must be non-negative and at most half the kernel size ", pair(kernel));
  const int64_t Hp = x.size(2) + 2 * padding[0], Wp = x.size(3) + 2 * padding[1];
  MDL_CHECK(kernel[0] <= Hp && kernel[1] <= Wp, op, ": kernel ", hw(kernel[0], kernel[1]),
            " is larger than the padded input ", hw(Hp, Wp), " (input ", x.shape(), ", padding ", pair(padding), ")");
  return {kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1]};
}

Shape pool_out_shape(const Tensor& x, const kernels::Pool2dParams& p) {
  return {x.size(0), x.size(1), (x.size(2) + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
          (x.size(3) + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
}

}  // namespace

Tensor max_pool2d(const Tensor& input, Pair kernel, Pair stride, Pair padding) {
  return batched_4d("max_pool2d", input, [&](const Tensor& x) {
    const kernels::Pool2dParams p = pool_params("max_pool2d", x, kernel, stride, padding);
    const Shape os = pool_out_shape(x, p);
    Tensor out = make_tensor(os, x.dtype(), x.device()), idx = make_tensor(os, kI64, x.device());
    kernels::max_pool2d_forward(x.device(), out, idx, x, p);
    record_fn("max_pool2d", {x}, {out}, {idx}, [xs = x.shape(), t = x.dtype()](const Grads& g, const FnNode& n) {
      const Tensor idx = n.saved(0);
      Tensor gx = make_tensor(xs, t, idx.device());
      kernels::max_pool2d_backward(idx.device(), gx, as(g[0], t), idx);
      return Grads{gx};
    });
    return out;
  });
}

Tensor avg_pool2d(const Tensor& input, Pair kernel, Pair stride, Pair padding, bool count_include_pad) {
  return batched_4d("avg_pool2d", input, [&](const Tensor& x) {
    const kernels::Pool2dParams p = pool_params("avg_pool2d", x, kernel, stride, padding);
    Tensor out = make_tensor(pool_out_shape(x, p), x.dtype(), x.device());
    kernels::avg_pool2d_forward(x.device(), out, x, p, count_include_pad);
    record_fn("avg_pool2d", {x}, {out}, {},
              [p, count_include_pad, xs = x.shape(), t = x.dtype(), d = x.device()](const Grads& g, const FnNode&) {
                Tensor gx = make_tensor(xs, t, d);
                kernels::avg_pool2d_backward(d, gx, as(g[0], t), p, count_include_pad);
                return Grads{gx};
              });
    return out;
  });
}

Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size) {
  return batched_4d("adaptive_avg_pool2d", input, [&](const Tensor& x) {
    check_floating("adaptive_avg_pool2d", "input", x);
    MDL_CHECK(output_size[0] > 0 && output_size[1] > 0, "adaptive_avg_pool2d: output size must be positive, got ",
              pair(output_size));
    MDL_CHECK(x.size(2) > 0 && x.size(3) > 0, "adaptive_avg_pool2d: input ", x.shape(), " has an empty spatial dim");
    Tensor out = make_tensor({x.size(0), x.size(1), output_size[0], output_size[1]}, x.dtype(), x.device());
    kernels::adaptive_avg_pool2d_forward(x.device(), out, x);
    record_fn("adaptive_avg_pool2d", {x}, {out}, {},
              [xs = x.shape(), t = x.dtype(), d = x.device()](const Grads& g, const FnNode&) {
                Tensor gx = make_tensor(xs, t, d);
                kernels::adaptive_avg_pool2d_backward(d, gx, as(g[0], t));
                return Grads{gx};
              });
    return out;
  });
}

}  // namespace mdl::nn::functional
