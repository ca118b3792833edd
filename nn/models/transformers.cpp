// ViT (patch embedding, pre-norm encoder, class-token head) and GPT (causal decoder-only).
#include "nn/models/models.h"
#include "ops/ops.h"

namespace mdl::nn::models {

ViT::ViT(ViTOptions o) : Module("ViT"), opts(o) {
  embed = register_module("embed", std::make_shared<PatchEmbedding>(o.image_size, o.patch_size, o.in_channels, o.dim));
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < o.depth; ++i)
    layers->push_back(std::make_shared<TransformerEncoderLayer>(
        o.dim, o.heads, TransformerEncoderLayerOptions{.dim_feedforward = o.mlp_dim, .dropout = o.dropout}));
  norm = register_module("norm", std::make_shared<LayerNorm>(Shape{o.dim}, 1e-6));
  head = register_module("head", std::make_shared<Linear>(o.dim, o.classes));
}

Tensor ViT::forward(const Tensor& x) {
  Tensor h = (*embed)(x);  // (B, N + 1, E)
  for (const auto& layer : *layers) h = (*layer)(h);
  return (*head)((*norm)(h).select(1, 0));  // the class token
}

GPT::GPT(GPTOptions o) : Module("GPT"), opts(o) {
  wte = register_module("wte", std::make_shared<Embedding>(o.vocab_size, o.n_embd));
  wpe = register_module("wpe", std::make_shared<Embedding>(o.context, o.n_embd));
  blocks = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < o.n_layer; ++i)
    blocks->push_back(std::make_shared<TransformerEncoderLayer>(
        o.n_embd, o.n_head,
        TransformerEncoderLayerOptions{.dim_feedforward = 4 * o.n_embd, .dropout = o.dropout, .causal = true}));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(Shape{o.n_embd}));
  lm_head = register_module("lm_head", std::make_shared<Linear>(o.n_embd, o.vocab_size, false));
}

Tensor GPT::forward(const Tensor& tokens) {
  MDL_CHECK(tokens.dim() == 2 && !tokens.is_floating_point(), "GPT: expected integer tokens (B, T), got ",
            tokens.dtype(), " ", shape_str(tokens.shape()));
  const int64_t T = tokens.size(1);
  MDL_CHECK(T <= opts.context, "GPT: sequence length ", T, " exceeds the context ", opts.context);
  // The positions 0..T-1 embed to wpe's first T rows: a view, no index tensor built on the host
  // and copied to the device (which would stall the GPU and forbid CUDA Graph capture).
  Tensor h = (*wte)(tokens) + wpe->weight.narrow(0, 0, T);  // (B, T, E)
  for (const auto& block : *blocks) h = (*block)(h);
  return (*lm_head)((*ln_f)(h));  // (B, T, V)
}

}  // namespace mdl::nn::models
