// The kernel contract for GELU's backward: grad_x = grad_out * gelu'(x) in one pass, for the exact
// GELU (Phi(x) + x phi(x)) and the tanh form, instead of the dozen elementwise ops the formula
// takes when composed. The caller (autograd/ops_elementwise.cpp) hands three tensors of one shape
// and one floating dtype on one device, any strides; grad_x is freshly allocated.
#pragma once
#include "tensor/kernels.h"

namespace mdl::kernels {
using GeluBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& x, bool tanh_approx);
}  // namespace mdl::kernels

namespace mdl::cpu {
kernels::GeluBackwardFn gelu_backward;  // tensor/cpu/gelu_backward.cpp
}  // namespace mdl::cpu

namespace mdl::kernels {
// The CPU slot is filled here (the CUDA slot by tensor/cuda/register.cu).
inline Stub<GeluBackwardFn> gelu_backward{"gelu_backward", &cpu::gelu_backward};
}  // namespace mdl::kernels
