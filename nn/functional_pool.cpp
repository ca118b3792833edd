// nn::functional pooling (max, average, adaptive average): window checks and output shapes, then
// the kernels of kernels/pool.h, each backward recorded right beside its forward. A channels-last
// input gives a channels-last result.
#include <string>

#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "nn/functional.h"
#include "nn/functional_checks.h"
#include "ops/autocast.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "kernels/pool.h"

namespace mdl::nn::functional {

MDL_DIFFERENTIABLE_OPS("max_pool2d", "max_pool2d_relu", "avg_pool2d", "adaptive_avg_pool2d");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;
using namespace detail;

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

// The pooling kernels write contiguous (N, C, H, W) planes (they read any strides): the result of a
// channels-last input is handed back channels-last, so the format flows on to the next layer.
Tensor in_format_of(const Tensor& x, const Tensor& out) {
  return x.memory_format() == MemoryFormat::ChannelsLast ? contiguous(out, MemoryFormat::ChannelsLast) : out;
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
    return in_format_of(x, out);
  });
}

Tensor max_pool2d_relu(const Tensor& input, Pair kernel, Pair stride, Pair padding) {
  const bool fused = input.defined() && input.device().is_cpu() && kernel == Pair{2, 2} &&
                     (stride == Pair{2, 2} || stride == Pair{0, 0}) && padding == Pair{0, 0};
  if (!fused) return relu(max_pool2d(input, kernel, stride, padding));
  return batched_4d("max_pool2d_relu", input, [&](const Tensor& x) {
    const kernels::Pool2dParams p = pool_params("max_pool2d_relu", x, kernel, stride, padding);
    const Shape os = pool_out_shape(x, p);
    Tensor out = make_tensor(os, x.dtype(), x.device()), codes = make_tensor(os, kU8, x.device());
    kernels::max_pool2x2_relu_forward(x.device(), out, codes, x);
    record_fn("max_pool2d_relu", {x}, {out}, {codes}, [xs = x.shape(), t = x.dtype()](const Grads& g, const FnNode& n) {
      const Tensor codes = n.saved(0);
      Tensor gx = make_tensor(xs, t, codes.device());
      kernels::max_pool2x2_relu_backward(codes.device(), gx, as(g[0], t).contiguous(), codes);
      return Grads{gx};
    });
    return in_format_of(x, out);
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
    return in_format_of(x, out);
  });
}

Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size) {
  return batched_4d("adaptive_avg_pool2d", input, [&](const Tensor& x) {
    check_floating("adaptive_avg_pool2d", "input", x);
    MDL_CHECK(output_size[0] > 0 && output_size[1] > 0, "adaptive_avg_pool2d: output size must be positive, got ",
              pair(output_size));
    MDL_CHECK(x.size(2) > 0 && x.size(3) > 0, "adaptive_avg_pool2d: input ", x.shape(), " has an empty spatial dim");
    // A 1x1 map is dense in both formats, so in_format_of would keep the strides it is made with:
    // made with the input's, it stays channels-last (the kernels' contiguous writes are its layout).
    const bool one_pixel = output_size[0] == 1 && output_size[1] == 1;
    Tensor out = make_tensor({x.size(0), x.size(1), output_size[0], output_size[1]}, x.dtype(), x.device(),
                             one_pixel ? x.memory_format() : MemoryFormat::Contiguous);
    kernels::adaptive_avg_pool2d_forward(x.device(), out, x);
    record_fn("adaptive_avg_pool2d", {x}, {out}, {},
              [xs = x.shape(), t = x.dtype(), d = x.device()](const Grads& g, const FnNode&) {
                Tensor gx = make_tensor(xs, t, d);
                kernels::adaptive_avg_pool2d_backward(d, gx, as(g[0], t));
                return Grads{gx};
              });
    return in_format_of(x, out);
  });
}

}  // namespace mdl::nn::functional
