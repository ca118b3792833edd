// Optimizer: the base of SGD, Adam and AdamW. It owns parameter groups (each with its own lr,
// weight decay, momentum, betas, eps) and per-parameter f32 state, and saves both through
// safetensors so that training resumes bit-identically. Names follow torch.optim.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::optim {

inline constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();

// A group of parameters with its own options. Options left unset (NaN) take the optimizer's
// defaults when the group is added; each optimizer reads the options it knows.
struct ParamGroup {
  std::vector<Tensor> params;
  double lr = kUnset;
  double weight_decay = kUnset;
  double momentum = kUnset;   // SGD
  double dampening = kUnset;  // SGD
  double beta1 = kUnset;      // Adam, AdamW
  double beta2 = kUnset;
  double eps = kUnset;
};

// Two groups, biases and every parameter with dim() <= 1 (norm weights, 1-D tensors) in the
// second with weight_decay 0, the rest in the first with `weight_decay`.
std::vector<ParamGroup> param_groups_no_decay(const NamedTensors& named_parameters, double weight_decay);

// Per-parameter state: f32 tensors of the parameter's shape, created on the first step.
// Parameters of f16/bf16 keep f32 state and are rounded once per step (no f32 master copy).
struct ParamState {
  int64_t step = 0;
  Tensor momentum_buffer, exp_avg, exp_avg_sq, max_exp_avg_sq;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Drops (set_to_none) or zeroes every parameter's .grad.
  void zero_grad(bool set_to_none = true);
  // One update of every parameter that has a .grad, under NoGradGuard; grads are multiplied by
  // grad_scale first (GradScaler passes 1/scale). Bumps each updated parameter's version.
  void step(double grad_scale = 1.0);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  void add_param_group(ParamGroup group);
  double lr() const;       // the first group's
  void set_lr(double lr);  // every group's
  int64_t step_count() const { return step_count_; }
  const ParamState* state(const Tensor& param) const;

  // "step", "param_groups.<g>.<option>" (0-dim f64), "param_groups.<g>.num_params" (0-dim i64),
  // "state.<i>.step" and "state.<i>.<buffer>" with i the parameter's index across groups.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& dict);
  void save(const std::string& path) const;
  void load(const std::string& path);

 protected:
  Optimizer(const char* name, ParamGroup defaults) : name_(name), defaults_(std::move(defaults)) {}
  void init_groups(std::vector<ParamGroup> groups);
  // Updates one parameter; param, grad contiguous, same shape, dtype and device; grad not null.
  virtual void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state,
                      double grad_scale) = 0;
  Tensor new_state_like(const Tensor& param) const;  // zeros, f32, param's shape and device

  const char* name_;
  ParamGroup defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
  int64_t step_count_ = 0;
};

}  // namespace mdl::optim
