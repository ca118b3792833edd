// clip_grad_norm_ (sum_squares kernel per grad, the norm and the scale kept on the device, one
// multiply in place per grad) and clip_grad_value_.
#include "optim/clip.h"

#include <cmath>

#include "tensor/grad_mode.h"
#include "tensor/error.h"
#include "kernels/optim.h"
#include "ops/native/factory.h"
#include "ops/ops.h"

namespace mdl::optim {

namespace {

// The grads of params (those that have one), checked.
std::vector<Tensor> grads_of(const std::vector<Tensor>& params, double max_norm) {
  MDL_CHECK(max_norm >= 0, "clip_grad_norm_: invalid max_norm ", max_norm);
  std::vector<Tensor> grads;
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    MDL_CHECK(g.is_floating_point(), "clip_grad_norm_: grad of dtype ", g.dtype(), " is not floating");
    const bool dense = g.is_contiguous() || g.is_contiguous(MemoryFormat::ChannelsLast);  // summed as flat arrays
    grads.push_back(dense ? g : g.contiguous());
  }
  return grads;
}

// The global L2 norm of grads (not empty), 0-dim f64 on the first one's device, summed in order.
Tensor global_norm(const std::vector<Tensor>& grads) {
  const Device device = grads[0].device();
  Tensor total;
  for (const Tensor& g : grads) {
    const Tensor s = empty({}, TensorOptions(kF64, g.device()));  // sum_squares writes it
    kernels::sum_squares(g.device(), g, s);
    if (total.defined()) total.add_(s.to(device));
    else total = s.to(device);
  }
  return sqrt(total);
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = grads_of(params, max_norm);
  if (grads.empty()) return 0.0;
  const double norm = global_norm(grads).item<double>();
  if (!std::isfinite(norm)) {
    MDL_CHECK(!error_if_nonfinite, "clip_grad_norm_: the total norm of the gradients is ", norm,
              " (non-finite); grads left untouched");
    return norm;
  }
  if (norm > max_norm) {
    const double coef = max_norm / (norm + 1e-6);
    for (const auto& p : params)
      if (Tensor g = p.grad(); g.defined()) g.mul_(coef);
  }
  return norm;
}

Tensor clip_grad_norm_on_device_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = grads_of(params, max_norm);
  if (grads.empty()) return Tensor();
  const Tensor norm = global_norm(grads);
  const Device device = norm.device();
  // 1 unless the norm is finite (norm * 0 is 0) and above max_norm.
  const Tensor zero = zeros({}, TensorOptions(kF64, device)), one = ones({}, TensorOptions(kF64, device));
  const Tensor shrink = where(eq(norm * 0.0, zero), max_norm / (norm + 1e-6), one);
  const Tensor coef = where(gt(norm, zero + max_norm), shrink, one);
  for (const auto& p : params)
    if (Tensor g = p.grad(); g.defined()) g.mul_(coef.to(g.device(), g.dtype()));
  return norm;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  MDL_CHECK(clip_value >= 0, "clip_grad_value_: invalid clip_value ", clip_value);
  NoGradGuard no_grad;
  for (const auto& p : params)
    if (Tensor g = p.grad(); g.defined()) g.copy_(clamp(g, -clip_value, clip_value));
}

}  // namespace mdl::optim
