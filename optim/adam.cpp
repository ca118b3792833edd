// Adam and AdamW: per-group options into the fused adam_step kernel (or, with the fused_adamw switch
// off, the same update composed of tensor ops), state created on first use.
#include "optim/adam.h"

#include <atomic>
#include <cmath>

#include "kernels/optim.h"
#include "switches/list/toggles.h"
#include "ops/ops.h"
#include "tensor/error.h"

namespace mdl::optim {
namespace {
ParamGroup adam_defaults(const char* name, const AdamOptions& o) {
  MDL_CHECK(o.betas.first >= 0 && o.betas.first < 1 && o.betas.second >= 0 && o.betas.second < 1, name,
            ": invalid betas (", o.betas.first, ", ", o.betas.second, ")");
  MDL_CHECK(o.eps >= 0, name, ": invalid eps ", o.eps);
  ParamGroup d;
  d.lr = o.lr;
  d.weight_decay = o.weight_decay;
  d.beta1 = o.betas.first;
  d.beta2 = o.betas.second;
  d.eps = o.eps;
  d.momentum = d.dampening = 0.0;
  return d;
}
AdamOptions as_adam(const AdamWOptions& o) {
  return {.lr = o.lr, .betas = o.betas, .eps = o.eps, .weight_decay = o.weight_decay, .amsgrad = o.amsgrad};
}
std::vector<ParamGroup> one_group(std::vector<Tensor> params) { return {ParamGroup{.params = std::move(params)}}; }

// adam_step's update written with tensor ops, as a framework without a fused step runs it: a pass
// and a temporary per line. The moments are f32 (as the kernel's); the parameter's step is
// computed in f32 (f64 for f64 parameters) and rounded into it once.
// The tensors are handles: updating m, v, vmax and param in place updates the optimizer's state.
void adam_composed(Tensor param, const Tensor& grad, Tensor m, Tensor v, Tensor vmax, const kernels::AdamParams& hp) {
  const DType c = param.dtype() == kF64 ? kF64 : kF32;
  Tensor p = param.to(c);  // param itself when it is already of type c
  Tensor g = grad.to(c) * hp.grad_scale;
  if (!hp.decoupled && hp.weight_decay != 0) g = g + p * hp.weight_decay;
  else p.mul_(1.0 - hp.lr * hp.weight_decay);
  const Tensor g32 = g.to(kF32);
  m.mul_(hp.beta1).add_(g32, 1.0 - hp.beta1);
  v.mul_(hp.beta2).add_(g32 * g32, 1.0 - hp.beta2);
  if (hp.amsgrad) vmax.copy_(maximum(vmax, v));
  const double bc1 = 1.0 - std::pow(hp.beta1, double(hp.step));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(hp.beta2, double(hp.step)));
  const Tensor denom = sqrt(hp.amsgrad ? vmax : v) / bc2_sqrt + hp.eps;
  p.add_((m / denom).to(c), -hp.lr / bc1);
  if (param.dtype() != c) param.copy_(p);
}
}  // namespace


Adam::Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(name, adam_defaults(name, options)), amsgrad_(options.amsgrad), decoupled_(decoupled) {
  init_groups(std::move(groups));
}
Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam("Adam", one_group(std::move(params)), options, false) {}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", std::move(groups), options, false) {}
AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam("AdamW", one_group(std::move(params)), as_adam(options), true) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Adam("AdamW", std::move(groups), as_adam(options), true) {}

kernels::AdamParams Adam::params_of(const ParamGroup& group, double grad_scale,
                                    const kernels::DeviceStepState& device) const {
  return {.lr = group.lr,
          .beta1 = group.beta1,
          .beta2 = group.beta2,
          .eps = group.eps,
          .weight_decay = group.weight_decay,
          .decoupled = decoupled_,
          .amsgrad = amsgrad_,
          .grad_scale = grad_scale,
          .device = device};
}

void Adam::make_state(const Tensor& param, ParamState& state) const {
  if (!state.exp_avg.defined()) {
    state.exp_avg = new_state_like(param);
    state.exp_avg_sq = new_state_like(param);
  }
  if (amsgrad_ && !state.max_exp_avg_sq.defined()) state.max_exp_avg_sq = new_state_like(param);
}

void Adam::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state,
                  double grad_scale, const Tensor& found_inf, const kernels::DeviceStepState& device) {
  make_state(param, state);
  kernels::AdamParams hp = params_of(group, grad_scale, device);
  const Tensor vmax = amsgrad_ ? state.max_exp_avg_sq : Tensor();
  if (!toggles::fused_adamw()) {  // the host reads the flag and the count, as an unfused framework must
    if (found_inf.defined() && found_inf.item<float>() != 0.0f) return;
    hp.step = state.steps();
    return adam_composed(param, grad, state.exp_avg, state.exp_avg_sq, vmax, hp);
  }
  kernels::adam_step(param.device(), param, grad, state.exp_avg, state.exp_avg_sq, vmax, hp);
}

void Adam::update_many(const ParamGroup& group, const std::vector<ParamUpdate>& updates, double grad_scale,
                       const Tensor& found_inf, const kernels::DeviceStepState& device) {
  if (!toggles::fused_adamw()) return Optimizer::update_many(group, updates, grad_scale, found_inf, device);
  std::vector<kernels::StepTensors> ts;
  ts.reserve(updates.size());
  for (const ParamUpdate& u : updates) {
    ParamState& s = *u.state;
    make_state(u.param, s);
    ts.push_back({u.param, u.grad, {s.exp_avg, s.exp_avg_sq, amsgrad_ ? s.max_exp_avg_sq : Tensor()}, s.step, u.copy});
  }
  kernels::adam_step_many(updates[0].param.device(), ts, params_of(group, grad_scale, device));
}

bool Adam::writes_weight_copies() const { return toggles::fused_adamw(); }

}  // namespace mdl::optim
