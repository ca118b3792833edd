// SGD: per-group options into the fused sgd_step kernel, momentum buffer created on first use.
#include "optim/sgd.h"

#include "tensor/error.h"
#include "kernels/optim.h"

namespace mdl::optim {
namespace {
ParamGroup sgd_defaults(const SGDOptions& o) {
  MDL_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
            "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum, " and dampening ",
            o.dampening);
  MDL_CHECK(o.momentum >= 0, "SGD: invalid momentum ", o.momentum);
  ParamGroup d;
  d.lr = o.lr;
  d.momentum = o.momentum;
  d.dampening = o.dampening;
  d.weight_decay = o.weight_decay;
  d.beta1 = d.beta2 = d.eps = 0.0;
  return d;
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", sgd_defaults(options)), options_(options) {
  init_groups(std::move(groups));
}

kernels::SGDParams SGD::params_of(const ParamGroup& group, double grad_scale,
                                  const kernels::DeviceStepState& device) const {
  return {.lr = group.lr,
          .momentum = group.momentum,
          .dampening = group.dampening,
          .weight_decay = group.weight_decay,
          .nesterov = options_.nesterov,
          .grad_scale = grad_scale,
          .device = device};
}

Tensor SGD::momentum_buffer(const ParamGroup& group, const Tensor& param, ParamState& state) const {
  if (group.momentum == 0) return Tensor();
  if (!state.momentum_buffer.defined()) state.momentum_buffer = new_state_like(param);
  return state.momentum_buffer;
}

void SGD::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state, double grad_scale,
                 const Tensor& /*found_inf: read by the kernel through device*/,
                 const kernels::DeviceStepState& device) {
  kernels::sgd_step(param.device(), param, grad, momentum_buffer(group, param, state),
                    params_of(group, grad_scale, device));
}

void SGD::update_many(const ParamGroup& group, const std::vector<ParamUpdate>& updates, double grad_scale,
                      const Tensor& /*found_inf: read by the kernel through device*/,
                      const kernels::DeviceStepState& device) {
  std::vector<kernels::StepTensors> ts;
  ts.reserve(updates.size());
  for (const ParamUpdate& u : updates)
    ts.push_back(
        {u.param, u.grad, {momentum_buffer(group, u.param, *u.state), Tensor(), Tensor()}, u.state->step, u.copy});
  kernels::sgd_step_many(updates[0].param.device(), ts, params_of(group, grad_scale, device));
}

bool SGD::writes_weight_copies() const { return true; }

}  // namespace mdl::optim
