// The kernel contract for mixed precision: GradScaler's fused pass that unscales a gradient in
// place and notes whether any of its elements is inf or NaN, reading and writing memory once
// (PyTorch's _amp_foreach_non_finite_check_and_unscale_). found_inf lives on the gradient's
// device, so a GPU backend needs no host sync per gradient.
#pragma once
#include "kernels/core.h"

namespace mdl::kernels {

// grad (n) contiguous f32 or f64: grad *= inv_scale; found_inf (0-dim f32, same device) is set
// to 1 when any element of grad was inf or NaN before scaling, and left alone otherwise.
using UnscaleCheckFn = void(const Tensor& grad, const Tensor& found_inf, double inv_scale);

#define MDL_AMP_KERNELS(X) X(unscale_check, UnscaleCheckFn, "amp_unscale_check", BOTH)
MDL_AMP_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
