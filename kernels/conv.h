// The kernel contract for 2-D convolution, forward beside backward. The caller
// (nn/functional_conv.cpp) checks arguments and allocates the outputs, each contiguous or
// channels-last (out and grad_x in the conv's format, grad_w in the weight's); inputs may have any
// strides. The CPU kernels take f32, f64 and bf16 (summed in f32, each output rounded once); the
// caller runs f16 in f32 on the CPU.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// Output size of a window sweep: floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1.
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;
  // The operands (x, w and the output gradient) hold bf16 values: bf16 tensors (autocast bf16 on
  // the CPU), or f32 ones holding them. A kernel may multiply them in bf16 exactly.
  bool bf16_values = false;
};
// out (N, Cout, Ho, Wo) = conv(x (N, Cin, H, W), w (Cout, Cin/groups, kH, kW)) + b (Cout, or undefined).
using Conv2dForwardFn = void(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                             const Conv2dParams& p);
// grad_x (N, Cin, H, W), grad_w (Cout, Cin/groups, kH, kW), grad_b (Cout) from grad_out (N, Cout, Ho, Wo);
// an undefined gradient is not computed. Each defined gradient is overwritten, not accumulated.
using Conv2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                              const Tensor& x, const Tensor& w, const Conv2dParams& p);

#define MDL_CONV_KERNELS(X)                          \
  X(conv2d_forward, Conv2dForwardFn, "conv2d", BOTH) \
  X(conv2d_backward, Conv2dBackwardFn, "conv2d_backward", BOTH)
MDL_CONV_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
