// Adam (weight decay as L2: wd * p added to the gradient) and AdamW (decoupled weight decay:
// p *= 1 - lr * wd before the Adam update), both with AMSGrad, as torch.optim.Adam/AdamW.
#pragma once
#include <utility>

#include "optim/optimizer.h"

namespace mdl::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
};
struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state, double grad_scale,
              const Tensor& found_inf, const kernels::DeviceStepState& device) override;
  void update_many(const ParamGroup& group, const std::vector<ParamUpdate>& updates, double grad_scale,
                   const Tensor& found_inf, const kernels::DeviceStepState& device) override;
  bool writes_weight_copies() const override;

 private:
  kernels::AdamParams params_of(const ParamGroup& group, double grad_scale,
                                const kernels::DeviceStepState& device) const;
  void make_state(const Tensor& param, ParamState& state) const;  // the buffers, on first use
  bool amsgrad_;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
};

}  // namespace mdl::optim
