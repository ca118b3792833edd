// Module behaviour and the model zoo: dotted parameter names, state dict round trips, and each
// model's parameter count (figures of the same configurations in PyTorch/torchvision) plus one
// forward and backward on a small batch.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "mdl.h"
#include "nn/models/models.h"
#include "tests/support/test_util.h"

using namespace mdl;
namespace M = mdl::nn::models;

namespace {
bool equal_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Runs forward and backward; every parameter must receive a finite gradient of its own shape.
void check_trains(nn::Module& m, const Tensor& x, const Tensor& target, int64_t classes) {
  Tensor out = m.forward(x);
  Tensor logits = out.reshape({-1, classes});
  Tensor loss = nn::functional::cross_entropy(logits, target.reshape({-1}));
  CHECK(std::isfinite(loss.item<float>()));
  loss.backward();
  int with_grad = 0;
  for (auto& [name, p] : m.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().shape() == p.shape());
    CHECK(std::isfinite(sum(abs(p.grad())).item<double>()));
    ++with_grad;
  }
  CHECK(with_grad > 0);
}
}  // namespace

TEST_CASE("models: SimpleCNN has PyTorch's names and 421,642 parameters") {
  manual_seed(0);
  auto m = M::SimpleCNN(1, 10);
  // conv 1*32*9+32, conv 32*64*9+64, fc 3136*128+128, fc 128*10+10
  CHECK(m->num_parameters() == 320 + 18496 + 401536 + 1290);
  auto names = m->named_parameters();
  REQUIRE(names.size() == 8);
  CHECK(names[0].first == "features.0.weight");
  CHECK(names[2].first == "features.3.weight");
  CHECK(names[4].first == "classifier.1.weight");
  check_trains(*m, randn({4, 1, 28, 28}), randint(0, 10, {4}), 10);
}

TEST_CASE("models: MLP") {
  auto m = M::MLP(784, {256, 128}, 10);
  CHECK(m->num_parameters() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  check_trains(*m, randn({3, 1, 28, 28}), randint(0, 10, {3}), 10);
}

TEST_CASE("models: ResNet-18 and ResNet-50 for 32x32 images") {
  manual_seed(1);
  auto r18 = M::resnet18(10, 3);
  CHECK(r18->num_parameters() == 11173962);  // the CIFAR ResNet-18 figure (torchvision blocks, 3x3 stem)
  auto names = r18->named_parameters();
  CHECK(names[0].first == "conv1.weight");
  bool has_downsample = false;
  for (auto& [n, p] : r18->named_buffers()) has_downsample |= n == "layer2.0.downsample.1.running_mean";
  CHECK(has_downsample);
  // Under a sanitizer 16x16 images, a quarter of the convs' work: the last stage still sees 2x2 planes.
  const int64_t side = test::kSanitized ? 16 : 32;
  check_trains(*r18, randn({2, 3, side, side}), randint(0, 10, {2}), 10);
  auto r50 = M::resnet50(10, 3);
  CHECK(r50->num_parameters() == 23520842);
  check_trains(*r50, randn({2, 3, side, side}), randint(0, 10, {2}), 10);  // bottleneck blocks, forward and backward
}

TEST_CASE("models: EfficientNet-B0 matches torchvision's parameter count") {
  manual_seed(2);
  CHECK(M::efficientnet_b0(1000, 3, false)->num_parameters() == 5288548);  // torchvision efficientnet_b0
  auto m = M::efficientnet_b0(10, 1, true);
  check_trains(*m, randn({2, 1, 32, 32}), randint(0, 10, {2}), 10);
}

TEST_CASE("models: EfficientNetV2-B0 matches Keras's parameter count, fused blocks first") {
  manual_seed(5);
  auto full = M::efficientnet_v2_b0(1000, 3, false);
  // Keras EfficientNetV2B0 (include_top, 1000 classes): 7,139,704 trainable and 60,608
  // non-trainable (the BatchNorms' moving mean and variance), 7,200,312 in all.
  CHECK(full->num_parameters() == 7139704);
  int64_t running_stats = 0;
  for (auto& [name, b] : full->named_buffers())
    if (name.find("running_") != std::string::npos) running_stats += b.numel();
  CHECK(running_stats == 60608);
  // Stages 1-3 are Fused-MBConv: a full 3x3 conv expands (16 -> 64 in stage 2), a 1x1 conv projects,
  // no squeeze-and-excitation. Stages 4-6 are MBConv: 1x1 expansion, depthwise 3x3, SE to in / 4.
  std::map<std::string, Shape> shapes;
  for (auto& [name, p] : full->named_parameters()) shapes[name] = p.shape();
  CHECK(shapes["features.1.0.block.0.0.weight"] == Shape{16, 32, 3, 3});
  CHECK(shapes["features.2.0.block.0.0.weight"] == Shape{64, 16, 3, 3});
  CHECK(shapes["features.2.0.block.1.0.weight"] == Shape{32, 64, 1, 1});
  CHECK(shapes.count("features.2.0.block.2.fc1.weight") == 0);
  CHECK(shapes["features.4.0.block.1.0.weight"] == Shape{192, 1, 3, 3});
  CHECK(shapes["features.4.0.block.2.fc1.weight"] == Shape{12, 192, 1, 1});
  CHECK(shapes["features.6.7.block.2.fc1.weight"] == Shape{48, 1152, 1, 1});
  CHECK(shapes["features.7.0.weight"] == Shape{1280, 192, 1, 1});
  CHECK(shapes["classifier.1.weight"] == Shape{1000, 1280});
  auto m = M::efficientnet_v2_b0(10, 1, true);
  check_trains(*m, randn({1, 1, 32, 32}), randint(0, 10, {1}), 10);
}

TEST_CASE("models: ViT parameter count follows the formula and vit_b_16's figure") {
  // Per layer: 2 LayerNorms (4E), attention (4E^2 + 4E), MLP (2EF + F + E).
  auto count = [](const M::ViTOptions& o) {
    int64_t E = o.dim, F = o.mlp_dim, N = (o.image_size / o.patch_size) * (o.image_size / o.patch_size);
    int64_t embed = o.in_channels * o.patch_size * o.patch_size * E + E + E + (N + 1) * E;
    int64_t layer = 4 * E + 4 * E * E + 4 * E + 2 * E * F + F + E;
    return embed + o.depth * layer + 2 * E + E * o.classes + o.classes;
  };
  M::ViTOptions small;
  auto m = std::make_shared<M::ViT>(small);
  CHECK(m->num_parameters() == count(small));
  M::ViTOptions b16{.image_size = 224,
                    .patch_size = 16,
                    .in_channels = 3,
                    .classes = 1000,
                    .dim = 768,
                    .depth = 12,
                    .heads = 12,
                    .mlp_dim = 3072};
  CHECK(count(b16) == 86567656);  // torchvision vit_b_16
  manual_seed(3);
  check_trains(*m, randn({2, 1, 28, 28}), randint(0, 10, {2}), 10);
}

TEST_CASE("models: GPT parameter count and a causal forward") {
  M::GPTOptions o{.vocab_size = 65, .context = 32, .n_layer = 2, .n_head = 4, .n_embd = 64};
  auto m = std::make_shared<M::GPT>(o);
  int64_t E = o.n_embd, V = o.vocab_size;
  int64_t layer = 4 * E + 4 * E * E + 4 * E + 2 * E * 4 * E + 4 * E + E;
  CHECK(m->num_parameters() == V * E + o.context * E + o.n_layer * layer + 2 * E + E * V);
  manual_seed(4);
  Tensor tokens = randint(0, V, {2, 16});
  // Causality: changing the last token leaves the logits of earlier positions unchanged.
  m->eval();
  Tensor a = m->forward(tokens);
  Tensor t2 = tokens.clone();
  t2.select(1, 15).fill_(0);
  Tensor b = m->forward(t2);
  CHECK(allclose(a.narrow(1, 0, 15), b.narrow(1, 0, 15), 1e-5, 1e-6));
  m->train();
  check_trains(*m, tokens, randint(0, V, {2, 16}), V);
}

TEST_CASE("models: state dict round trips through safetensors bit-exactly") {
  manual_seed(5);
  auto a = M::resnet18(10, 1);
  auto b = M::resnet18(10, 1);
  std::string path = "/tmp/mdl_test_models_" + std::to_string(::getpid()) + ".safetensors";
  a->save(path);
  b->load(path);
  std::remove(path.c_str());
  auto sa = a->state_dict(), sb = b->state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sa[i].first == sb[i].first);
    CHECK(equal_bits(sa[i].second, sb[i].second));
  }
}

TEST_CASE("models: load_state_dict names missing, unexpected and misshapen tensors") {
  auto m = M::SimpleCNN(1, 10);
  auto state = m->state_dict();
  state.pop_back();
  CHECK_THROWS_WITH_AS(m->load_state_dict(state), doctest::Contains("missing 'classifier.3.bias'"), Error);
  state = m->state_dict();
  state.emplace_back("extra.weight", zeros({1}));
  CHECK_THROWS_WITH_AS(m->load_state_dict(state), doctest::Contains("unexpected 'extra.weight'"), Error);
  state = m->state_dict();
  state[0].second = zeros({2, 2});
  CHECK_THROWS_WITH_AS(m->load_state_dict(state), doctest::Contains("'features.0.weight' has shape [2,2]"), Error);
}

TEST_CASE("models: to(dtype) updates parameters in place and train/eval reaches children") {
  auto m = M::SimpleCNN(1, 10);
  auto conv = std::dynamic_pointer_cast<nn::Sequential>(m->named_children()[0].second);
  Tensor w = m->parameters()[0];
  m->to(kF64);
  CHECK(w.dtype() == kF64);
  CHECK(m->parameters()[0].dtype() == kF64);
  m->eval();
  for (auto& [n, mod] : m->named_modules()) CHECK_FALSE(mod->is_training());
  CHECK(m->str().find("Conv2d(1, 32, kernel_size=(3, 3)") != std::string::npos);
}
