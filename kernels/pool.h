// The kernel contract for 2-D pooling (max, average, adaptive average), each forward beside its
// backward. The caller (nn/functional_pool.cpp) checks arguments and allocates contiguous outputs;
// inputs may have any strides and any floating dtype.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// Window size, stride and padding; the output size is that of kernels/conv.h's sweep.
struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// out (N, C, Ho, Wo) = max over each window (padding counts as -inf; NaN wins); indices (I64, same
// shape) hold the winner's flat position h * W + w in its (H, W) plane.
using MaxPool2dForwardFn = void(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p);
// grad_x (N, C, H, W) = grad_out routed to the winners (summed where windows share one).
using MaxPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices);
// The fused ReLU(max pool) over 2x2 windows at stride 2 without padding, Ho = H / 2, Wo = W / 2:
// out (N, C, Ho, Wo) = relu(the window's max), with max pool's visiting order and NaN rule and
// relu's (NaN stays NaN); codes (U8, same shape, contiguous) the winner's place in its window,
// 2 * row + column, or kPoolReluBlocked where the max is <= 0 and the ReLU passes no gradient.
inline constexpr uint8_t kPoolReluBlocked = 4;
using MaxPool2x2ReluForwardFn = void(const Tensor& out, const Tensor& codes, const Tensor& x);
// grad_x (N, C, H, W, contiguous) = grad_out (contiguous) at each window's winner, +0 elsewhere
// (the rows and columns no window covers included).
using MaxPool2x2ReluBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& codes);
// out = window mean; the divisor counts padded positions when count_include_pad.
using AvgPool2dForwardFn = void(const Tensor& out, const Tensor& x, const Pool2dParams& p, bool count_include_pad);
using AvgPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Pool2dParams& p,
                                 bool count_include_pad);
// Output cell (i, j) averages rows [floor(i H / Ho), ceil((i + 1) H / Ho)) and likewise columns.
using AdaptiveAvgPool2dForwardFn = void(const Tensor& out, const Tensor& x);
using AdaptiveAvgPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out);

#define MDL_POOL_KERNELS(X)                                                                     \
  X(max_pool2d_forward, MaxPool2dForwardFn, "max_pool2d", BOTH)                                 \
  X(max_pool2d_backward, MaxPool2dBackwardFn, "max_pool2d_backward", BOTH)                      \
  X(max_pool2x2_relu_forward, MaxPool2x2ReluForwardFn, "max_pool2x2_relu", CPU_ONLY)            \
  X(max_pool2x2_relu_backward, MaxPool2x2ReluBackwardFn, "max_pool2x2_relu_backward", CPU_ONLY) \
  X(avg_pool2d_forward, AvgPool2dForwardFn, "avg_pool2d", BOTH)                                 \
  X(avg_pool2d_backward, AvgPool2dBackwardFn, "avg_pool2d_backward", BOTH)                      \
  X(adaptive_avg_pool2d_forward, AdaptiveAvgPool2dForwardFn, "adaptive_avg_pool2d", BOTH)       \
  X(adaptive_avg_pool2d_backward, AdaptiveAvgPool2dBackwardFn, "adaptive_avg_pool2d_backward", BOTH)
MDL_POOL_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
