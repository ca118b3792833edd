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

#include "kernels/optim.h"
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
  // The lr the first LRScheduler built on this group found (PyTorch's 'initial_lr'): every later
  // scheduler starts its schedule from it, so one built after load_state_dict resumes the same one.
  double initial_lr = kUnset;
};

// Two groups, biases and every parameter with dim() <= 1 (norm weights, 1-D tensors) in the
// second with weight_decay 0, the rest in the first with `weight_decay`; a tensor named twice
// (tied weights) goes in once, by its first name.
std::vector<ParamGroup> param_groups_no_decay(const NamedTensors& named_parameters, double weight_decay);

// Per-parameter state: f32 tensors of the parameter's shape, created on the first step.
// Parameters of f16/bf16 keep f32 state and are rounded once per step (no f32 master copy).
// The step count lives on the parameter's device, where the kernels read it: a step skipped on
// the device (step_if_finite) does not count, and a CUDA Graph replays it with its current value.
struct ParamState {
  Tensor step;  // 0-dim i64: the updates applied
  Tensor momentum_buffer, exp_avg, exp_avg_sq, max_exp_avg_sq;
  int64_t steps() const;  // step, read on the host (waits for the device); 0 before the first
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Drops (set_to_none) or zeroes every parameter's .grad.
  void zero_grad(bool set_to_none = true);
  // One update of every parameter that has a .grad, under NoGradGuard; grads are multiplied by
  // grad_scale first. Bumps each updated parameter's version.
  void step(double grad_scale = 1.0);
  // step(), decided on the device: when found_inf (0-dim f32) is nonzero, every kernel leaves its
  // parameter, state and step count as they were. GradScaler steps through this, so an AMP step
  // never waits for the GPU and can be captured as a CUDA Graph.
  void step_if_finite(const Tensor& found_inf);

  const char* name() const { return name_; }  // "SGD", "Adam", "AdamW"
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  void add_param_group(ParamGroup group);
  double lr() const;       // the first group's
  void set_lr(double lr);  // every group's
  // Writes each group's lr where the kernels read it, on its parameters' device (a group's copy
  // lives on the device of its first parameter). step() does this itself; a loop that replays a
  // captured step (cuda::Graph) must call it after changing an lr, before the replay.
  void sync_device_lr();
  int64_t step_count() const;  // the steps applied (reads the device counter)
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
  void check_options(const ParamGroup& group, size_t index) const;  // each option in its range, or throws
  // Updates one parameter; param, grad contiguous, same shape, dtype and device; grad not null.
  // state.step is already advanced for this update; found_inf (0-dim f32 on param's device, or
  // undefined) says to skip it; device points the kernel at the step, the flag and the lr on the
  // device.
  virtual void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state,
                      double grad_scale, const Tensor& found_inf, const kernels::DeviceStepState& device) = 0;
  // Updates several parameters of one group, dtype and device, as update() would each; device
  // holds the flag and the lr (its step is unset: each state's own counter counts). By default one
  // update() each; SGD and Adam hand them to one multi-tensor kernel. copy is the parameter's
  // autocast copy in the weight cache (ops/autocast.h), to be rewritten from the new value in the
  // same pass; it is set only when writes_weight_copies() says the update writes it.
  struct ParamUpdate {
    Tensor param, grad;
    ParamState* state = nullptr;
    Tensor copy;
  };
  virtual void update_many(const ParamGroup& group, const std::vector<ParamUpdate>& updates, double grad_scale,
                           const Tensor& found_inf, const kernels::DeviceStepState& device);
  // Whether update_many writes each ParamUpdate::copy (then every update with a copy goes through it).
  virtual bool writes_weight_copies() const { return false; }
  Tensor new_state_like(const Tensor& param) const;  // zeros, f32, param's shape, device and layout

  const char* name_;
  ParamGroup defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
  Tensor step_count_;  // 0-dim i64 on the first updated parameter's device; undefined before
  struct DeviceLR {
    Tensor value;  // 0-dim f64
    double synced = kUnset;
  };
  std::vector<DeviceLR> device_lr_;  // per group

 private:
  void step_impl(double grad_scale, const Tensor& found_inf);
  // What update() hands its kernel for a parameter of group g.
  kernels::DeviceStepState device_state(size_t g, const Tensor& param, const ParamState& state,
                                        const Tensor& found_inf) const;
};

}  // namespace mdl::optim
