// clip_grad_norm_ (sum_squares kernel per grad, one scale in place) and clip_grad_value_.
#include "optim/clip.h"

#include <cmath>

#include "tensor/grad_mode.h"
#include "tensor/error.h"
#include "kernels/optim.h"
#include "ops/ops.h"

namespace mdl::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite) {
  MDL_CHECK(max_norm >= 0, "clip_grad_norm_: invalid max_norm ", max_norm);
  NoGradGuard no_grad;
  double total = 0;
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    MDL_CHECK(g.is_floating_point(), "clip_grad_norm_: grad of dtype ", g.dtype(), " is not floating");
    total += kernels::sum_squares(g.device(), g.is_contiguous() ? g : g.contiguous());
  }
  double norm = std::sqrt(total);
  if (!std::isfinite(norm)) {
    MDL_CHECK(!error_if_nonfinite, "clip_grad_norm_: the total norm of the gradients is ", norm,
              " (non-finite); grads left untouched");
    return norm;
  }
  if (norm > max_norm) {
    double coef = max_norm / (norm + 1e-6);
    for (const auto& p : params)
      if (Tensor g = p.grad(); g.defined()) g.mul_(coef);
  }
  return norm;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  MDL_CHECK(clip_value >= 0, "clip_grad_value_: invalid clip_value ", clip_value);
  NoGradGuard no_grad;
  for (const auto& p : params)
    if (Tensor g = p.grad(); g.defined()) g.copy_(clamp(g, -clip_value, clip_value));
}

}  // namespace mdl::optim
