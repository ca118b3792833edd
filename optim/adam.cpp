// Adam and AdamW: per-group options into the fused adam_step kernel, state created on first use.
#include "optim/adam.h"

#include "tensor/error.h"
#include "kernels/optim.h"

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

void Adam::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state,
                  double grad_scale) {
  if (!state.exp_avg.defined()) {
    state.exp_avg = new_state_like(param);
    state.exp_avg_sq = new_state_like(param);
  }
  if (amsgrad_ && !state.max_exp_avg_sq.defined()) state.max_exp_avg_sq = new_state_like(param);
  ++state.step;
  kernels::AdamParams hp{.lr = group.lr,
                         .beta1 = group.beta1,
                         .beta2 = group.beta2,
                         .eps = group.eps,
                         .weight_decay = group.weight_decay,
                         .decoupled = decoupled_,
                         .amsgrad = amsgrad_,
                         .step = state.step,
                         .grad_scale = grad_scale};
  kernels::adam_step(param.device(), param, grad, state.exp_avg, state.exp_avg_sq,
                     amsgrad_ ? state.max_exp_avg_sq : Tensor(), hp);
}

}  // namespace mdl::optim
