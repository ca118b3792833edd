// MultiheadAttention, the pre-norm TransformerEncoderLayer and PatchEmbedding against PyTorch:
// weights, inputs, outputs and input gradients written by PyTorch 1.13 in f64
// (tests/fixtures/make_torch_transformer.py), loaded through our safetensors reader.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include "mdl.h"
#include "ops/gradcheck.h"
#include "nn/transformer.h"

using namespace mdl;

namespace {

const std::map<std::string, Tensor>& fixture() {
  static const std::map<std::string, Tensor> f = [] {
    const auto path = std::filesystem::path(__FILE__).parent_path().parent_path() / "fixtures" /
                      "torch_transformer.safetensors";
    std::map<std::string, Tensor> m;
    for (auto& [n, t] : io::load_safetensors(path.string())) m[n] = t;
    return m;
  }();
  return f;
}

const Tensor& get(const std::string& name) {
  auto it = fixture().find(name);
  REQUIRE_MESSAGE(it != fixture().end(), "fixture lacks ", name);
  return it->second;
}

// The fixture's tensors whose names start with prefix, with the prefix removed.
NamedTensors state_with_prefix(const std::string& prefix, const std::vector<std::string>& skip = {}) {
  NamedTensors s;
  for (auto& [n, t] : fixture()) {
    if (n.rfind(prefix, 0) != 0) continue;
    std::string rest = n.substr(prefix.size());
    bool skipped = false;
    for (auto& k : skip) skipped |= rest == k;
    if (!skipped) s.emplace_back(rest, t);
  }
  return s;
}

}  // namespace

TEST_CASE("transformer vs PyTorch: MultiheadAttention with a key padding mask, forward and input gradient") {
  nn::MultiheadAttention mha(16, 4);
  mha.to(kF64);
  mha.load_state_dict(state_with_prefix("mha.", {"x", "pad", "y", "dx"}));
  Tensor x = get("mha.x").clone().requires_grad_(true);
  Tensor y = mha.forward(x, x, x, get("mha.pad").to(kBool));
  CHECK(allclose(y, get("mha.y"), 1e-10, 1e-12));
  y.backward(ones_like(y));
  CHECK(allclose(x.grad(), get("mha.dx"), 1e-10, 1e-12));
}

TEST_CASE("transformer vs PyTorch: pre-norm TransformerEncoderLayer (GELU), plain and causal") {
  auto opts = nn::TransformerEncoderLayerOptions{.dim_feedforward = 32, .dropout = 0.0, .activation = "gelu"};
  nn::TransformerEncoderLayer layer(16, 4, opts);
  layer.to(kF64);
  const std::vector<std::string> data = {"x", "y", "dx", "y_causal"};
  layer.load_state_dict(state_with_prefix("enc.", data));
  Tensor x = get("enc.x").clone().requires_grad_(true);
  Tensor y = layer(x);
  CHECK(allclose(y, get("enc.y"), 1e-10, 1e-12));
  y.backward(ones_like(y));
  CHECK(allclose(x.grad(), get("enc.dx"), 1e-10, 1e-12));

  opts.causal = true;
  nn::TransformerEncoderLayer causal(16, 4, opts);
  causal.to(kF64);
  causal.load_state_dict(state_with_prefix("enc.", data));
  NoGradGuard no_grad;
  CHECK(allclose(causal(get("enc.x")), get("enc.y_causal"), 1e-10, 1e-12));
  CHECK_FALSE(allclose(causal(get("enc.x")), get("enc.y"), 1e-3, 1e-3));  // the mask mattered
}

TEST_CASE("transformer vs PyTorch: ViT patch embedding (conv patches, class token, positions)") {
  nn::PatchEmbedding embed(8, 4, 3, 16);
  embed.to(kF64);
  embed.load_state_dict(state_with_prefix("patch.", {"img", "y"}));
  Tensor y = embed(get("patch.img"));
  CHECK(y.shape() == Shape{2, 5, 16});
  CHECK(allclose(y, get("patch.y"), 1e-10, 1e-12));
}

TEST_CASE("transformer layers: gradcheck (f64) through the inputs and a weight of each module") {
  using VT = std::vector<Tensor>;
  manual_seed(11);
  auto leaf = [](Shape s) { return randn(s, kF64).requires_grad_(true); };

  nn::MultiheadAttention mha(8, 2);
  mha.to(kF64);
  const Tensor pad = from_vector<uint8_t>({0, 0, 0, 1}, {1, 4}).to(kBool);
  auto r = autograd::gradcheck([&](const VT& x) { return mha.forward(x[0], x[1], x[1], pad); },
                               {leaf({1, 3, 8}), leaf({1, 4, 8})});
  INFO(r.report);
  CHECK(r.ok);

  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .causal = true});
  layer.to(kF64);
  Tensor w = layer.linear1->weight;
  r = autograd::gradcheck([&](const VT& x) { return layer(x[0]); }, {leaf({2, 3, 8})});
  INFO(r.report);
  CHECK(r.ok);
  // The weight: a copy is the gradcheck leaf, written into the layer before each evaluation.
  r = autograd::gradcheck(
      [&](const VT& x) {
        layer.linear1->weight = x[0];
        return layer(get("enc.x").narrow(2, 0, 8).narrow(1, 0, 3));
      },
      {w.detach().clone().requires_grad_(true)});
  INFO(r.report);
  CHECK(r.ok);
  layer.linear1->weight = w;

  nn::PatchEmbedding embed(4, 2, 1, 6);
  embed.to(kF64);
  r = autograd::gradcheck([&](const VT& x) { return embed(x[0]); }, {leaf({2, 1, 4, 4})});
  INFO(r.report);
  CHECK(r.ok);
}
