// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (wd * p added to the
// gradient), as torch.optim.SGD: buf = g on the first step, then momentum * buf + (1 - dampening) * g.
#pragma once
#include "optim/optimizer.h"

namespace mdl::optim {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  const SGDOptions& options() const { return options_; }

 protected:
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state, double grad_scale,
              const Tensor& found_inf, const kernels::DeviceStepState& device) override;
  void update_many(const ParamGroup& group, const std::vector<ParamUpdate>& updates, double grad_scale,
                   const Tensor& found_inf, const kernels::DeviceStepState& device) override;
  bool writes_weight_copies() const override;

 private:
  kernels::SGDParams params_of(const ParamGroup& group, double grad_scale,
                               const kernels::DeviceStepState& device) const;
  Tensor momentum_buffer(const ParamGroup& group, const Tensor& param, ParamState& state) const;  // made on first use
  SGDOptions options_;
};

}  // namespace mdl::optim
