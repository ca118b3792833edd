// The kernel contract for GELU's backward: grad_x = grad_out * gelu'(x) in one pass, for the exact
// GELU (Phi(x) + x phi(x)) and the tanh form, instead of the dozen elementwise ops the formula
// takes when composed. The caller (ops/elementwise.cpp) hands three tensors of one shape
// and one floating dtype on one device, any strides; grad_x is freshly allocated.
#pragma once
#include "kernels/core.h"

namespace mdl::kernels {
using GeluBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& x, bool tanh_approx);

#define MDL_GELU_KERNELS(X) X(gelu_backward, GeluBackwardFn, "gelu_backward", BOTH)
MDL_GELU_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
