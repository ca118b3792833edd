// The kernel contract for the fused normalisations (batch norm; group norm, with layer norm as its
// one-group case), each forward paired with its backward. The callers (nn/functional_norm.cpp)
// check arguments and hand contiguous inputs of the documented layouts.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// "Stat" tensors (means, inverse stds, affine parameters, parameter gradients, losses) are f64
// for f64 inputs and f32 for f32, f16 and bf16 inputs. Undefined weight/bias mean 1 and 0;
// an undefined gradient output is not computed.

// x, out (N, C, S); mean, invstd (C). training: mean, var (biased) and invstd = 1/sqrt(var + eps)
// (0 where var + eps is 0) come from the batch; otherwise mean and invstd are inputs (var unused).
// out = v = (x - mean) * a + b with a = w * invstd rounded to the stat type per channel
// (kernels/norm_math.h);
// relu: out = relu(v) (NaN stays NaN); with a residual (N, C, S) of x's dtype (undefined: none;
// given only with relu), relu(v + residual), the sum in the stat type, rounded once. A training forward with running_mean and
// running_var (C, contiguous stat tensors; undefined: none) also blends the batch's statistics into
// them in place, over n = N * S values per channel: r = r * (1 - momentum) + s * momentum, the
// variance made unbiased (s = var * n / (n - 1)); in the same pass, not a chain of elementwise ops.
using BatchNormForwardFn = void(const Tensor& out, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                                const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                                const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                                double eps, bool relu);
// grad_x (N, C, S) of x's dtype, grad_w and grad_b (C), from grad_out (N, C, S) of x's dtype.
// training also carries the gradient through the batch statistics. relu: the forward applied a
// ReLU, so grad_out counts only where the pre-activation v (recomputed from x, weight and bias as
// the forward computed it) is not <= 0, as ReLU's backward reads its input.
using BatchNormBackwardFn = void(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b,
                                 const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& weight, const Tensor& bias, bool training, bool relu);
// x, out (N, C, S) in `groups` groups of C/groups channels; mean, rstd (N, groups): statistics over
// each (n, group), weight and bias per channel. Layer norm is (M, features, 1) with one group.
using GroupNormForwardFn = void(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                const Tensor& weight, const Tensor& bias, int64_t groups, double eps);
using GroupNormBackwardFn = void(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b,
                                 const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& weight, int64_t groups);

#define MDL_NORM_KERNELS(X)                                                \
  X(batch_norm_forward, BatchNormForwardFn, "batch_norm", BOTH)            \
  X(batch_norm_backward, BatchNormBackwardFn, "batch_norm_backward", BOTH) \
  X(group_norm_forward, GroupNormForwardFn, "group_norm", BOTH)            \
  X(group_norm_backward, GroupNormBackwardFn, "group_norm_backward", BOTH)
MDL_NORM_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
