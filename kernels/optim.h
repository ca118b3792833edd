// The kernel contract for the optimizer steps and gradient clipping: each step updates one
// parameter and its f32 state in a single pass over memory, with no temporaries. The callers
// (optim/*.cpp) check that param, grad and state are contiguous, same shape and same device.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// Hyperparameters of one Adam/AdamW step. step counts from 1 (bias correction).
struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // AdamW: p *= 1 - lr*wd; Adam: g += wd*p
  bool amsgrad = false;
  int64_t step = 1;
  double grad_scale = 1.0;  // grads are multiplied by this first (GradScaler passes 1/scale)
};
struct SGDParams {
  double lr = 1e-2, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first = true;  // momentum buffer is set to g on the first step, as PyTorch
  double grad_scale = 1.0;
};

// param, grad (n) of one floating dtype; exp_avg, exp_avg_sq, max_exp_avg_sq (n) f32;
// max_exp_avg_sq is undefined unless amsgrad. The update computes in f32 (f64 for f64 params)
// and rounds into param once.
using AdamStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamParams& hp);
// param, grad (n); momentum_buffer (n) f32, undefined when momentum == 0.
using SGDStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SGDParams& hp);
// sum of squares of a contiguous floating tensor, accumulated in f64 (clip_grad_norm_).
using SumSquaresFn = double(const Tensor& t);

#define MDL_OPTIM_KERNELS(X)                  \
  X(adam_step, AdamStepFn, "adam_step", BOTH) \
  X(sgd_step, SGDStepFn, "sgd_step", BOTH)    \
  X(sum_squares, SumSquaresFn, "sum_squares", BOTH)
MDL_OPTIM_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
