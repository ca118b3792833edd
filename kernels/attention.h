// The kernel contract for fused scaled-dot-product attention. The forward keeps only the
// per-row logsumexp besides its output; the backward recomputes the probabilities from it one
// block of query rows at a time, so no (L, S) matrix of a whole batch is ever stored.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// Shapes share the batch dims * (expanded beforehand, so batch strides may be 0); q, k, v, mask
// and grad_out may have any strides. Scores are q k^T * scale; key j is hidden from query i when
// causal and j > i, or when mask (Bool (*, L, S), true = attend) is defined and false there.
// A query row that can see no key gets a zero output, zero gradients and lse = +inf.

// Outputs (out, dq, dk, dv) may have any batch and row strides but a unit column stride, so a caller
// can write heads straight into a (B, L, H * D) activation or a packed (B, L, 3 * H * D) gradient.

// q (*, L, E), k (*, S, E), v (*, S, Ev); out (*, L, Ev) of q's dtype; lse (*, L) contiguous, f64
// for f64 inputs and f32 otherwise: log of each row's softmax denominator.
using AttentionForwardFn = void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& mask, bool causal, double scale);
// dq (*, L, E), dk (*, S, E), dv (*, S, Ev) of q's dtype, each undefined when not wanted;
// grad_out (*, L, Ev) of q's dtype; out and lse as the forward left them.
using AttentionBackwardFn = void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const Tensor& mask, bool causal, double scale);

#define MDL_ATTENTION_KERNELS(X)                                                 \
  X(attention_forward, AttentionForwardFn, "scaled_dot_product_attention", BOTH) \
  X(attention_backward, AttentionBackwardFn, "scaled_dot_product_attention_backward", BOTH)
MDL_ATTENTION_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
