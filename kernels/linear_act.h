// The kernel contract for the fused linear layer y = act(x @ w^T + b): the GEMM with bias and
// activation applied in its epilogue (cuBLASLt's BIAS / RELU_BIAS / GELU_AUX_BIAS epilogues on
// CUDA; our GEMM then one bias+activation pass on the CPU), and the backward's activation
// gradient fused with the bias gradient. The caller (nn/functional_linear.cpp) checks arguments
// and hands these contiguous tensors of one floating dtype on one device.
#pragma once
#include "kernels/activation.h"
#include "kernels/core.h"

namespace mdl::kernels {

// x (M, K), w (N, K), bias (N) or undefined; out (M, N) = act(x @ w^T + bias), accumulated in f32
// (f64 for f64) and rounded once. pre (M, N) is defined for GeluTanh only and receives the
// pre-activation x @ w^T + bias in out's dtype (what the backward needs, as cuBLASLt's GELU_AUX).
using LinearActForwardFn = void(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w,
                                const Tensor& bias, Activation act);
// grad_pre (M, N) = grad_out * act'(pre), where saved is out for Relu (out > 0 iff pre > 0) and pre
// for GeluTanh (None: a copy). grad_bias (N), when defined, = the column sums of grad_pre as
// stored (f32 accumulation, f64 for f64). All contiguous, of one dtype, but grad_bias may be f32 for
// f16/bf16 operands (the f32 sums, not rounded).
using LinearActBackwardFn = void(const Tensor& grad_pre, const Tensor& grad_bias, const Tensor& grad_out,
                                 const Tensor& saved, Activation act);

#define MDL_LINEAR_ACT_KERNELS(X)                               \
  X(linear_act_forward, LinearActForwardFn, "linear_act", BOTH) \
  X(linear_act_backward, LinearActBackwardFn, "linear_act_backward", BOTH)
MDL_LINEAR_ACT_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
