// nn::functional: the stateless layer ops (linear, conv2d, pooling, norms, dropout, embedding,
// attention) and the losses, each differentiable. Modules in nn/ are thin owners of their
// parameters around these.
#pragma once
#include <array>
#include <optional>
#include <string>

#include "ops/native/factory.h"
#include "tensor/tensor.h"

namespace mdl::nn::functional {

using Pair = std::array<int64_t, 2>;

// y = x @ w^T + b; x (*, in), w (out, in), b (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// x (N, C_in, H, W), w (C_out, C_in/groups, kH, kW), b (C_out) or undefined.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(), Pair stride = {1, 1}, Pair padding = {0, 0},
              Pair dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0} /* 0: = kernel */, Pair padding = {0, 0});
// relu(max_pool2d(x, ...)) as one op, the same values and gradients. On the CPU, 2x2 windows at
// stride 2 without padding run fused (kernels/pool.h: one pass, a byte per window kept for the
// backward); other windows and devices run max_pool2d, then relu.
Tensor max_pool2d_relu(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0},
                  bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size);

// Normalisation. batch_norm updates running_mean/var in place when training (momentum as PyTorch:
// running = (1 - momentum) * running + momentum * batch_stat, unbiased var in the running stat).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(...)) with the ReLU folded into batch norm's passes, forward and backward: the
// normalised values are never stored, nor a mask (the backward recomputes their signs from x).
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(...) + residual) (a ResNet block's end) with the sum and the ReLU in batch norm's
// normalising pass: the normalised tensor is never stored. The backward is add_relu's then batch
// norm's. residual: x's shape, dtype and device. In f32 and f64 the same bits as the composed ops; in
// f16 and bf16 the sum is rounded once, not twice.
Tensor batch_norm_add_relu(const Tensor& x, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                           double momentum = 0.1, double eps = 1e-5);
// Normalises over the trailing dims given by normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

// Inverted dropout: zeroes with probability p and scales the rest by 1/(1-p); identity when !training.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* gen = nullptr);
// weight (num_embeddings, dim), index integral of any shape -> index.shape + [dim].
Tensor embedding(const Tensor& index, const Tensor& weight);

// q (.., L, E), k (.., S, E), v (.., S, Ev); mask Bool broadcastable to (.., L, S), true = attend
// (PyTorch's boolean attn_mask convention), or undefined. causal masks j > i.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = Tensor(),
                                    bool causal = false, std::optional<double> scale = std::nullopt);
// Self-attention on a packed projection: qkv (B, L, 3E) = [q | k | v], each split into num_heads
// heads of E / num_heads along its last dim; returns (B, L, E), the heads side by side. The same
// results as scaled_dot_product_attention on the heads, transposed back and joined, but q, k and v
// are read in place and the output and qkv's gradient written in this layout: no transposes or
// concatenations around the kernel. mask broadcasts to (B, num_heads, L, L).
Tensor packed_self_attention(const Tensor& qkv, int64_t num_heads, const Tensor& mask = Tensor(), bool causal = false,
                             std::optional<double> scale = std::nullopt);

// Losses.
enum class Reduction { None, Mean, Sum };
struct CrossEntropyOptions {
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
// logits (N, C) or (N, C, d1, ...), target integral (N) or (N, d1, ...): fused log-softmax + NLL.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts = {});
// log_probs (N, C), target (N).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean);

}  // namespace mdl::nn::functional
