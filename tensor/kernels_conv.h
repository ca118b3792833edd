// The kernel contract for 2-D convolution and pooling, each forward beside its backward. Callers
// (nn/functional_conv.cpp) check arguments and allocate contiguous outputs; inputs may have any
// strides. Conv kernels take f32 and f64 (the caller runs f16/bf16 in f32), pooling any float.
#pragma once
#include <cstdint>

#include "tensor/kernels.h"

namespace mdl::kernels {

// Output size of a window sweep: floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1.
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;
};
struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// out (N, Cout, Ho, Wo) = conv(x (N, Cin, H, W), w (Cout, Cin/groups, kH, kW)) + b (Cout, or undefined).
using Conv2dForwardFn = void(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                             const Conv2dParams& p);
// grad_x (N, Cin, H, W), grad_w (Cout, Cin/groups, kH, kW), grad_b (Cout) from grad_out (N, Cout, Ho, Wo);
// an undefined gradient is not computed. Each defined gradient is overwritten, not accumulated.
using Conv2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b,
                              const Tensor& grad_out, const Tensor& x, const Tensor& w, const Conv2dParams& p);

// out (N, C, Ho, Wo) = max over each window (padding counts as -inf; NaN wins); indices (I64, same
// shape) hold the winner's flat position h * W + w in its (H, W) plane.
using MaxPool2dForwardFn = void(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p);
// grad_x (N, C, H, W) = grad_out routed to the winners (summed where windows share one).
using MaxPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices);
// out = window mean; the divisor counts padded positions when count_include_pad.
using AvgPool2dForwardFn = void(const Tensor& out, const Tensor& x, const Pool2dParams& p, bool count_include_pad);
using AvgPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Pool2dParams& p,
                                 bool count_include_pad);
// Output cell (i, j) averages rows [floor(i H / Ho), ceil((i + 1) H / Ho)) and likewise columns.
using AdaptiveAvgPool2dForwardFn = void(const Tensor& out, const Tensor& x);
using AdaptiveAvgPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out);

inline Stub<Conv2dForwardFn> conv2d_forward{"conv2d"};
inline Stub<Conv2dBackwardFn> conv2d_backward{"conv2d_backward"};
inline Stub<MaxPool2dForwardFn> max_pool2d_forward{"max_pool2d"};
inline Stub<MaxPool2dBackwardFn> max_pool2d_backward{"max_pool2d_backward"};
inline Stub<AvgPool2dForwardFn> avg_pool2d_forward{"avg_pool2d"};
inline Stub<AvgPool2dBackwardFn> avg_pool2d_backward{"avg_pool2d_backward"};
inline Stub<AdaptiveAvgPool2dForwardFn> adaptive_avg_pool2d_forward{"adaptive_avg_pool2d"};
inline Stub<AdaptiveAvgPool2dBackwardFn> adaptive_avg_pool2d_backward{"adaptive_avg_pool2d_backward"};

// Fills the CPU slots above with the mdl::cpu kernels below (defined in tensor/cpu/conv.cpp).
void register_conv_kernels();

}  // namespace mdl::kernels

namespace mdl::cpu {

// The CPU conv paths: im2col + GEMM for any conv (tensor/cpu/conv.cpp), and a direct kernel for
// depthwise convs, groups == Cin and Cout a multiple of Cin (tensor/cpu/depthwise.cpp).
kernels::Conv2dForwardFn conv2d_forward;
kernels::Conv2dBackwardFn conv2d_backward;
kernels::Conv2dForwardFn depthwise_conv2d_forward;
kernels::Conv2dBackwardFn depthwise_conv2d_backward;
// Whether conv2d_forward/backward send depthwise convs to the direct kernel (default true);
// false forces im2col, for benchmarks and cross-checks.
void set_depthwise_direct(bool on);
bool depthwise_direct();

// Whether the 2x2 / stride 2 max pool on f32 runs on 4-float vectors (default true); false runs
// the scalar loop, for benchmarks and cross-checks.
void set_max_pool_vectorized(bool on);
bool max_pool_vectorized();
kernels::MaxPool2dForwardFn max_pool2d_forward;
kernels::MaxPool2dBackwardFn max_pool2d_backward;
kernels::AvgPool2dForwardFn avg_pool2d_forward;
kernels::AvgPool2dBackwardFn avg_pool2d_backward;
kernels::AdaptiveAvgPool2dForwardFn adaptive_avg_pool2d_forward;
kernels::AdaptiveAvgPool2dBackwardFn adaptive_avg_pool2d_backward;

}  // namespace mdl::cpu
