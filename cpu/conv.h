// The CPU conv paths beyond the table's conv2d_forward/backward: im2col + GEMM for any conv
// (cpu/conv.cpp), and a direct kernel for depthwise convs, groups == Cin and Cout a multiple of
// Cin (cpu/depthwise.cpp), with the switch between them.
#pragma once
#include "kernels/conv.h"

namespace mdl::cpu {

kernels::Conv2dForwardFn depthwise_conv2d_forward;
kernels::Conv2dBackwardFn depthwise_conv2d_backward;

}  // namespace mdl::cpu
