// MultiheadAttention, TransformerEncoderLayer and PatchEmbedding.
#include "nn/transformer.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "nn/linear_act.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"

namespace mdl::nn {

namespace F = functional;

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double dropout, bool bias)
    : Module("MultiheadAttention"), embed_dim(e), num_heads(h), dropout_p(dropout) {
  MDL_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim ", e, " must be divisible by num_heads ", h);
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
  init::xavier_uniform_(in_proj_weight);
  if (bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, bias));
  if (bias) init::zeros_(out_proj->bias);
}

Tensor MultiheadAttention::forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding_mask,
                                   const Tensor& attn_mask, bool causal) {
  MDL_CHECK(q.dim() == 3 && q.size(2) == embed_dim, "MultiheadAttention: expected query (B, L, ", embed_dim,
            "), got shape ", shape_str(q.shape()));
  MDL_CHECK(k.dim() == 3 && v.dim() == 3 && k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == v.size(1),
            "MultiheadAttention: key ", shape_str(k.shape()), " and value ", shape_str(v.shape()),
            " do not match query ", shape_str(q.shape()));
  const int64_t B = q.size(0), L = q.size(1), S = k.size(1), E = embed_dim, H = num_heads, D = E / H;
  Tensor mask = attn_mask;
  if (key_padding_mask.defined()) {
    MDL_CHECK(key_padding_mask.dtype() == kBool && key_padding_mask.shape() == Shape({B, S}),
              "MultiheadAttention: key_padding_mask must be Bool of shape ", shape_str({B, S}), ", got ",
              key_padding_mask.dtype(), " ", shape_str(key_padding_mask.shape()));
    Tensor keep = eq(key_padding_mask, scalar_tensor(0, kBool)).view({B, 1, 1, S});
    mask = mask.defined() ? mul(mask, keep).to(kBool) : keep;
  }
  auto finish = [&](Tensor attn) {  // (B, L, E), the heads side by side
    if (dropout_p > 0) attn = F::dropout(attn, dropout_p, is_training());
    return (*out_proj)(attn);
  };
  const bool self = q.is_same(k) && k.is_same(v);
  if (self && toggles::packed_attention())  // one projection GEMM; the heads read and written in place
    return finish(F::packed_self_attention(F::linear(q, in_proj_weight, in_proj_bias), H, mask, causal));
  Tensor qp, kp, vp;
  if (self) {
    auto qkv = split(F::linear(q, in_proj_weight, in_proj_bias), E, -1);
    qp = qkv[0], kp = qkv[1], vp = qkv[2];
  } else {
    auto w = split(in_proj_weight, E, 0);
    std::vector<Tensor> b = in_proj_bias.defined() ? split(in_proj_bias, E, 0) : std::vector<Tensor>(3);
    qp = F::linear(q, w[0], b[0]), kp = F::linear(k, w[1], b[1]), vp = F::linear(v, w[2], b[2]);
  }
  auto heads = [&](const Tensor& t, int64_t len) { return reshape(t, {B, len, H, D}).transpose(1, 2); };  // (B,H,len,D)
  Tensor attn = F::scaled_dot_product_attention(heads(qp, L), heads(kp, S), heads(vp, S), mask, causal);
  return finish(reshape(attn.transpose(1, 2), {B, L, E}));
}

std::string MultiheadAttention::extra_repr() const {
  std::ostringstream s;
  s << "embed_dim=" << embed_dim << ", num_heads=" << num_heads;
  return s.str();
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t nhead, TransformerEncoderLayerOptions o)
    : Module("TransformerEncoderLayer"), opts(o) {
  MDL_CHECK(o.activation == "gelu" || o.activation == "relu" || o.activation == "gelu_tanh",
            "TransformerEncoderLayer: activation must be gelu, relu or gelu_tanh, got '", o.activation, "'");
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d, nhead, o.dropout));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& key_padding_mask) {
  Tensor h = (*norm1)(x);
  Tensor a = self_attn->forward(h, h, h, key_padding_mask, Tensor(), opts.causal);
  self_attn->note_output(a);
  Tensor y = x + (*dropout1)(a);
  // relu and gelu_tanh run linear1 fused with its activation (one GEMM with a bias+activation epilogue).
  Tensor f = opts.activation == "gelu" ? gelu((*linear1)((*norm2)(y)))
                                       : F::linear((*norm2)(y), linear1->weight, linear1->bias,
                                                   opts.activation == "relu" ? Activation::Relu : Activation::GeluTanh);
  return y + (*dropout2)((*linear2)((*dropout)(f)));
}

PatchEmbedding::PatchEmbedding(int64_t image, int64_t patch, int64_t in_channels, int64_t e)
    : Module("PatchEmbedding"), image_size(image), patch_size(patch) {
  MDL_CHECK(patch > 0 && image % patch == 0, "PatchEmbedding: image_size ", image, " must be a multiple of patch_size ",
            patch);
  num_patches = (image / patch) * (image / patch);
  proj = register_module(
      "proj", std::make_shared<Conv2d>(in_channels, e, Pair{patch, patch}, Conv2dOptions{.stride = {patch, patch}}));
  class_token = register_parameter("class_token", zeros({1, 1, e}));
  pos_embedding = register_parameter("pos_embedding", empty({1, num_patches + 1, e}));
  init::normal_(pos_embedding, 0.0, 0.02);
}

Tensor PatchEmbedding::forward(const Tensor& x) {
  MDL_CHECK(x.dim() == 4 && x.size(2) == image_size && x.size(3) == image_size, "PatchEmbedding: expected (B, C, ",
            image_size, ", ", image_size, "), got shape ", shape_str(x.shape()));
  const int64_t B = x.size(0);
  Tensor p = (*proj)(x).flatten(2).transpose(1, 2);  // (B, N, E)
  Tensor cls = class_token.expand({B, 1, class_token.size(2)});
  return cat({cls, p}, 1) + pos_embedding;
}

}  // namespace mdl::nn
