// The kernel contract for the fused normalisations, dropout and softmax cross-entropy: each
// forward paired with its backward. The callers (nn/functional_norm.cpp, nn/functional_loss.cpp)
// check arguments and hand these contiguous inputs of the documented layouts.
#pragma once
#include <cstdint>

#include "tensor/kernels.h"

namespace mdl::kernels {

// "Stat" tensors (means, inverse stds, affine parameters, parameter gradients, losses) are f64
// for f64 inputs and f32 for f32, f16 and bf16 inputs. Undefined weight/bias mean 1 and 0;
// an undefined gradient output is not computed.

// x, out (N, C, S); mean, invstd (C). training: mean, var (biased) and invstd = 1/sqrt(var + eps)
// come from the batch; otherwise mean and invstd are inputs (var unused). out = (x - mean) * invstd * w + b.
using BatchNormForwardFn = void(const Tensor& out, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                                const Tensor& x, const Tensor& weight, const Tensor& bias, bool training, double eps);
// grad_x (N, C, S) of x's dtype, grad_w and grad_b (C), from grad_out (N, C, S) of x's dtype.
// training also carries the gradient through the batch statistics.
using BatchNormBackwardFn = void(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b,
                                 const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& weight, bool training);
// x, out (N, C, S) in `groups` groups of C/groups channels; mean, rstd (N, groups): statistics over
// each (n, group), weight and bias per channel. Layer norm is (M, features, 1) with one group.
using GroupNormForwardFn = void(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                                const Tensor& weight, const Tensor& bias, int64_t groups, double eps);
using GroupNormBackwardFn = void(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b,
                                 const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& weight, int64_t groups);

// mask (Bool, contiguous): element i is kept when uniform draw i >= p, the draws being the
// Philox words of (seed, offset + i / 4), word i % 4: the mask depends on (seed, offset) only.
using DropoutMaskFn = void(const Tensor& mask, double p, uint64_t seed, uint64_t offset);
// out (contiguous) = mask ? in * scale : 0; in and mask of out's shape, any strides.
using MaskedScaleFn = void(const Tensor& out, const Tensor& in, const Tensor& mask, double scale);

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

inline Stub<BatchNormForwardFn> batch_norm_forward{"batch_norm"};
inline Stub<BatchNormBackwardFn> batch_norm_backward{"batch_norm_backward"};
inline Stub<GroupNormForwardFn> group_norm_forward{"group_norm"};
inline Stub<GroupNormBackwardFn> group_norm_backward{"group_norm_backward"};
inline Stub<DropoutMaskFn> dropout_mask{"dropout"};
inline Stub<MaskedScaleFn> masked_scale{"dropout_scale"};
inline Stub<CrossEntropyForwardFn> cross_entropy_forward{"cross_entropy"};
inline Stub<CrossEntropyBackwardFn> cross_entropy_backward{"cross_entropy_backward"};

// Fill the CPU slots above (tensor/cpu/norm.cpp, tensor/cpu/loss.cpp); ensure_kernels_registered()
// calls register_norm_kernels(), which calls register_loss_kernels().
void register_norm_kernels();
void register_loss_kernels();

}  // namespace mdl::kernels
