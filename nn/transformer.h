// Transformer building blocks: MultiheadAttention (batch-first, PyTorch's parameter layout),
// a pre-norm TransformerEncoderLayer, and the ViT patch embedding with class token and
// learned position embeddings.
#pragma once
#include "nn/layers.h"

namespace mdl::nn {

// Its dropout zeroes features of the attention's output (the heads joined, before out_proj), not
// the attention weights as PyTorch's does: mdl's fused attention kernels (CPU and GPU) hold no
// random mask, and dropping the weights would mean the composed softmax path at every training
// step. Evaluation is the same as PyTorch's; training regularises differently.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true);
  // q (B, L, E), k and v (B, S, E). key_padding_mask Bool (B, S), true = padding (ignored), as
  // PyTorch. attn_mask Bool broadcastable to (B, H, L, S), true = may attend. causal masks j > i.
  Tensor forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask = Tensor(),
                 const Tensor& attn_mask = Tensor(), bool causal = false);
  Tensor forward(const Tensor& x) override { return forward(x, x, x); }
  std::string extra_repr() const override;
  Tensor in_proj_weight, in_proj_bias;  // (3E, E), (3E)
  std::shared_ptr<Linear> out_proj;
  int64_t embed_dim, num_heads;
  double dropout_p;
};

struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "gelu";  // (erf) or "relu" or "gelu_tanh" (the tanh approximation)
  double layer_norm_eps = 1e-5;
  bool causal = false;  // mask future positions (decoder-only models)
};

// Pre-norm: x + attn(norm1(x)), then + ff(norm2(x)).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions opts = {});
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask);
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  TransformerEncoderLayerOptions opts;
};

// (B, C, H, W) -> (B, 1 + H/p * W/p, E): patches by a strided convolution, a class token
// in front, learned position embeddings added.
class PatchEmbedding : public Module {
 public:
  PatchEmbedding(int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t embed_dim);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> proj;
  Tensor class_token, pos_embedding;  // (1, 1, E), (1, N + 1, E)
  int64_t image_size, patch_size, num_patches;
};

}  // namespace mdl::nn
