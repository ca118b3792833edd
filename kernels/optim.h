// The kernel contract for the optimizer steps and gradient clipping: each step updates one
// parameter and its f32 state in a single pass over memory, with no temporaries. The callers
// (optim/*.cpp) check that param, grad and state have one shape, one device and one dense layout
// (contiguous, or all channels-last), so a kernel walks them as flat arrays.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/core.h"

namespace mdl::kernels {

// What a step reads from the parameter's device rather than from the host, so that it needs no
// host sync and a CUDA Graph replays it with the values of the moment. Each may be null.
struct DeviceStepState {
  const int64_t* step = nullptr;     // the parameter's update count, this update included
  const float* found_inf = nullptr;  // nonzero: skip the update, leaving param and state as they are
  const double* lr = nullptr;        // the learning rate, in place of the host's
};

// Hyperparameters of one Adam/AdamW step. step counts from 1 (bias correction); device.step and
// device.lr, when set, replace step and lr.
struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // AdamW: p *= 1 - lr*wd; Adam: g += wd*p
  bool amsgrad = false;
  int64_t step = 1;
  double grad_scale = 1.0;  // grads are multiplied by this first
  DeviceStepState device;
};
struct SGDParams {
  double lr = 1e-2, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first = true;  // momentum buffer is set to g on the first step, as PyTorch; device.step,
                      // when set, replaces it (first when *device.step == 1), as device.lr does lr
  double grad_scale = 1.0;
  DeviceStepState device;
};

// param, grad (n) of one floating dtype; exp_avg, exp_avg_sq, max_exp_avg_sq (n) f32;
// max_exp_avg_sq is undefined unless amsgrad. The update computes in f32 (f64 for f64 params)
// and rounds into param once.
using AdamStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamParams& hp);
// param, grad (n); momentum_buffer (n) f32, undefined when momentum == 0.
using SGDStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDParams& hp);
// One parameter of a multi-tensor step: param and grad, its f32 state (SGD: {momentum_buffer};
// Adam: {exp_avg, exp_avg_sq, max_exp_avg_sq}; undefined where unused), its step counter
// (0-dim i64 on its device) and its 16-bit copy (f16 or bf16, param's shape and layout; undefined
// when none), which the update overwrites with the new param rounded to the copy's dtype.
struct StepTensors {
  Tensor param, grad;
  std::array<Tensor, 3> state;
  Tensor step;
  Tensor copy;
};
// A profiled multi-tensor step's bytes: the gradient and the step counter (advance_steps writes it)
// read, the copy written, the parameter and its state read and written.
inline profiler::detail::KernelArg kernel_arg(const std::vector<StepTensors>& ts) {
  using profiler::detail::tensor_bytes;
  int64_t bytes = 0;
  for (const StepTensors& t : ts) {
    bytes += tensor_bytes(t.grad) + tensor_bytes(t.step) + tensor_bytes(t.copy) + 2 * tensor_bytes(t.param);
    for (const Tensor& s : t.state) bytes += 2 * tensor_bytes(s);
  }
  return {.list_bytes = bytes};
}
// The updates of many parameters of one group, dtype and device: what adam_step / sgd_step do to
// each, each with its own step counter (hp.device.step is not read; hp.device.found_inf and
// hp.device.lr are), and the copies written in the same pass (all of one dtype). A GPU updates up
// to 24 parameters per launch instead of one.
using AdamStepManyFn = void(const std::vector<StepTensors>& ts, const AdamParams& hp);
using SGDStepManyFn = void(const std::vector<StepTensors>& ts, const SGDParams& hp);
// out (0-dim f64 on t's device) = the sum of squares of t (contiguous, floating), accumulated in
// f64 in a fixed order (clip_grad_norm_, without a host sync).
using SumSquaresFn = void(const Tensor& t, const Tensor& out);
// steps: 0-dim i64 tensors on one device, each += 1 unless found_inf (0-dim f32 on that device,
// or undefined) is nonzero. One launch for many counters, before the updates that read them.
using AdvanceStepsFn = void(const std::vector<Tensor>& steps, const Tensor& found_inf);

#define MDL_OPTIM_KERNELS(X)                                \
  X(adam_step, AdamStepFn, "adam_step", BOTH)               \
  X(sgd_step, SGDStepFn, "sgd_step", BOTH)                  \
  X(adam_step_many, AdamStepManyFn, "adam_step_many", BOTH) \
  X(sgd_step_many, SGDStepManyFn, "sgd_step_many", BOTH)    \
  X(sum_squares, SumSquaresFn, "sum_squares", BOTH)         \
  X(advance_steps, AdvanceStepsFn, "advance_steps", BOTH)
MDL_OPTIM_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
