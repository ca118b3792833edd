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

void SGD::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state, double grad_scale,
                 const Tensor& /*found_inf: read by the kernel through device*/,
                 const kernels::DeviceStepState& device) {
  kernels::SGDParams hp{.lr = group.lr,
                        .momentum = group.momentum,
                        .dampening = group.dampening,
                        .weight_decay = group.weight_decay,
                        .nesterov = options_.nesterov,
                        .grad_scale = grad_scale,
                        .device = device};
  if (group.momentum != 0 && !state.momentum_buffer.defined()) state.momentum_buffer = new_state_like(param);
  kernels::sgd_step(param.device(), param, grad, group.momentum != 0 ? state.momentum_buffer : Tensor(), hp);
}

}  // namespace mdl::optim
