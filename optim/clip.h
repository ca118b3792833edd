// Gradient clipping, as torch.nn.utils: clip_grad_norm_ scales all grads together so their
// global L2 norm is at most max_norm; clip_grad_value_ clamps each element. Both in place.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace mdl::optim {

// Returns the global L2 norm of the grads (computed in f64, one pass per tensor). Scales them
// by max_norm / (norm + 1e-6) only when the norm is finite and above max_norm. A non-finite
// norm is returned with the grads untouched, or throws mdl::Error when error_if_nonfinite.
// Parameters without a .grad are skipped.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite = false);
// The same clipping decided on the device: returns the norm as a 0-dim f64 on the first grad's
// device (undefined without grads) and never waits for it, so a captured step may clip. Every
// grad is multiplied by the factor, 1 when nothing is clipped (one more pass than the host's).
Tensor clip_grad_norm_on_device_(const std::vector<Tensor>& params, double max_norm);
// Clamps every grad element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace mdl::optim
