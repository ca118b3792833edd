// Gradient accumulation: k micro-batches per optimizer step, for an effective batch of k * b
// when k * b does not fit. The recipe: zero the grads once; for each micro-batch, compute the
// loss with a mean reduction over its b samples, divide by k, and backward (grads add up);
// then step once. With a model free of batch statistics (no batch norm) the update equals
// that of one batch of k * b, to float rounding. accumulate_step() does exactly this.
#pragma once
#include <cstdint>

#include "tensor/grad_mode.h"
#include "optim/optimizer.h"
#include "tensor/error.h"
#include "ops/ops.h"

namespace mdl::optim {

// loss_fn(i) returns the mean loss of micro-batch i in [0, k). Returns the mean of the k
// losses (detached, 0-dim). Runs opt.zero_grad(), k backwards, then opt.step(grad_scale).
template <class LossFn>
Tensor accumulate_step(Optimizer& opt, int64_t k, LossFn&& loss_fn, double grad_scale = 1.0) {
  MDL_CHECK(k >= 1, "accumulate_step: k must be at least 1, got ", k);
  opt.zero_grad();
  Tensor total;
  for (int64_t i = 0; i < k; ++i) {
    Tensor loss = loss_fn(i) / double(k);
    loss.backward();
    NoGradGuard no_grad;
    total = total.defined() ? total + loss.detach() : loss.detach();
  }
  opt.step(grad_scale);
  return total;
}

}  // namespace mdl::optim
