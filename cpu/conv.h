// The CPU conv paths beyond the table's conv2d_forward/backward: im2col + GEMM for any conv
// (cpu/conv.cpp), and a direct kernel for depthwise convs, groups == Cin and Cout a multiple of
// Cin (cpu/depthwise.cpp), with the switch between them.
#pragma once
#include "kernels/conv.h"

namespace mdl::cpu {

kernels::Conv2dForwardFn depthwise_conv2d_forward;
kernels::Conv2dBackwardFn depthwise_conv2d_backward;
// Whether conv2d_forward/backward send depthwise convs to the direct kernel (default true);
// false forces im2col, for benchmarks and cross-checks.
void set_depthwise_direct(bool on);
bool depthwise_direct();

}  // namespace mdl::cpu
