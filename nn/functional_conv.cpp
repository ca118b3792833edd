// nn::functional::conv2d: argument checks and output shape, then the kernels of kernels/conv.h,
// the backward recorded right beside the forward as one node. bf16 convs sum in f32 and round each
// result once, their operands read as they are; f16 convs run on f32 copies on the CPU; on CUDA
// cuDNN takes both as they are (f32 compute). The
// output and the input's gradient are channels-last when the input or the weight is.
#include <string>

#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "nn/functional.h"
#include "nn/functional_checks.h"
#include "ops/autocast.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "kernels/conv.h"

namespace mdl::nn::functional {

MDL_DIFFERENTIABLE_OPS("conv2d");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;
using namespace detail;

Tensor conv2d(const Tensor& input_in, const Tensor& w_in, const Tensor& b_in, Pair stride, Pair padding, Pair dilation,
              int64_t groups) {
  auto [input, w, b] = amp::autocast_lower(input_in, w_in, b_in);
  // w and b captured by name: clang 14 cannot capture structured bindings implicitly.
  return batched_4d("conv2d", input, [&, &w = w, &b = b](const Tensor& x) {
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
    MDL_CHECK(w.size(1) > 0 && kh > 0 && kw > 0, "conv2d: weight ", w.shape(),
              " has an empty input-channel or kernel dim");
    MDL_CHECK(Cout % groups == 0, "conv2d: weight ", w.shape(), " has ", Cout,
              " output channels, which groups=", groups, " does not divide");
    MDL_CHECK(C == w.size(1) * groups, "conv2d: input ", x.shape(), " has ", C, " channels but weight ", w.shape(),
              " expects ", w.size(1) * groups, " (groups=", groups, ")");
    check_bias("conv2d", b, Cout, x);
    const int64_t ekh = dilation[0] * (kh - 1) + 1, ekw = dilation[1] * (kw - 1) + 1;
    const int64_t Hp = H + 2 * padding[0], Wp = W + 2 * padding[1];
    MDL_CHECK(ekh <= Hp && ekw <= Wp, "conv2d: kernel ", hw(kh, kw), " (", hw(ekh, ekw),
              " dilated) is larger than the ", "padded input ", hw(Hp, Wp), " (input ", x.shape(), ", padding ",
              pair(padding), ")");
    const int64_t Ho = (Hp - ekh) / stride[0] + 1, Wo = (Wp - ekw) / stride[1] + 1;
    const DType ct = conv_dtype(x.dtype(), x.device());
    // bf16 tensors hold bf16 values: the CPU kernels see it from their dtype (Conv2dParams::bf16_values).
    const kernels::Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};

    // Channels-last when the input or the weight is (as PyTorch): the format flows on to the next layer.
    const MemoryFormat fmt = x.memory_format() == MemoryFormat::ChannelsLast ? MemoryFormat::ChannelsLast
                                                                             : w.memory_format();
    Tensor out = make_tensor({N, Cout, Ho, Wo}, ct, x.device(), fmt);
    kernels::conv2d_forward(x.device(), out, as(x, ct), as(w, ct), as(b, ct), p);
    Tensor y = as(out, x.dtype());
    record_fn("conv2d", {x, w, b}, {y}, {x, w}, [p, ct, Cout, fmt](const Grads& g, const FnNode& n) {
      const Tensor x = as(n.saved(0), ct), w = as(n.saved(1), ct);
      Grads r(3);
      if (n.needs(0)) r[0] = make_tensor(x.shape(), ct, x.device(), fmt);
      if (n.needs(1)) r[1] = make_tensor(w.shape(), ct, x.device(), w.memory_format());
      if (n.needs(2)) r[2] = make_tensor({Cout}, ct, x.device());
      kernels::conv2d_backward(x.device(), r[0], r[1], r[2], as(g[0], ct), x, w, p);
      return r;  // cast back to each input's dtype by the node
    });
    return y;
  });
}

}  // namespace mdl::nn::functional
