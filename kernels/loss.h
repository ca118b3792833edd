// The kernel contract for the fused softmax cross-entropy (log-softmax, NLL and label smoothing in
// one pass), forward beside backward. The caller (nn/functional_loss.cpp) checks arguments; the
// statistics are f64 for f64 logits and f32 otherwise.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// logits (N, C, D); target (N, D) I64 holding classes in [0, C) or ignore_index; loss, logsum (N, D) stat.
// With m the max over C, logsum = log sum_c exp(x[c] - m) and lse = m + logsum:
// loss = (1 - ls) * (lse - x[target]) + ls * (lse - mean_c x[c]), 0 where ignored.
using CrossEntropyForwardFn = void(const Tensor& loss, const Tensor& logsum, const Tensor& logits, const Tensor& target,
                                   int64_t ignore_index, double label_smoothing);
// grad_logits (N, C, D) of the logits' dtype = grad_loss * (softmax - (1 - ls) * onehot(target) - ls / C),
// 0 where ignored; grad_loss (N, D) stat, any strides (a reduced loss's gradient arrives expanded).
using CrossEntropyBackwardFn = void(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                                    const Tensor& target, const Tensor& logsum, int64_t ignore_index,
                                    double label_smoothing);

#define MDL_LOSS_KERNELS(X)                                              \
  X(cross_entropy_forward, CrossEntropyForwardFn, "cross_entropy", BOTH) \
  X(cross_entropy_backward, CrossEntropyBackwardFn, "cross_entropy_backward", BOTH)
MDL_LOSS_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
