// The model zoo: MLP, SimpleCNN (the model of the reports this project grew from) and its
// depthwise separable variant SeparableCNN, ResNet-18/50
// for small images, EfficientNet-B0 (MBConv: depthwise separable convolutions, squeeze-and-
// excitation, SiLU), EfficientNetV2-B0 (Fused-MBConv in its early stages), ViT and GPT.
// Parameter names follow torchvision / nanoGPT where they exist.
#pragma once
#include <vector>

#include "nn/container.h"
#include "nn/layers.h"
#include "nn/separable_conv.h"
#include "nn/transformer.h"

namespace mdl::nn::models {

// Linear-ReLU(-Dropout) for each hidden width, then a Linear to `out`.
std::shared_ptr<Sequential> MLP(int64_t in, const std::vector<int64_t>& hidden, int64_t out, double dropout = 0.0);

// Conv(3x3, 32)-ReLU-MaxPool(2), Conv(3x3, 64)-ReLU-MaxPool(2), Flatten, Linear(128)-ReLU, Linear(classes).
// Padding 1, so 28x28 inputs give 64x7x7 features (421,642 parameters for 1 channel, 10 classes).
std::shared_ptr<Sequential> SimpleCNN(int64_t in_channels = 1, int64_t classes = 10, int64_t image_size = 28);

// SimpleCNN, lighter: its second conv (32 -> 64, 3x3) as a depthwise separable conv (3x3 depthwise,
// then 1x1 pointwise; nn/separable_conv.h), about 7.9x fewer multiply-adds in that layer
// (405,546 parameters for 1 channel, 10 classes).
std::shared_ptr<Sequential> SeparableCNN(int64_t in_channels = 1, int64_t classes = 10, int64_t image_size = 28);

class BasicBlock : public Module {
 public:
  static constexpr int64_t expansion = 1;
  BasicBlock(int64_t in, int64_t planes, int64_t stride);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  std::shared_ptr<Sequential> downsample;  // null when the shapes already match
};

class Bottleneck : public Module {
 public:
  static constexpr int64_t expansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1, conv2, conv3;
  std::shared_ptr<BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<Sequential> downsample;
};

// torchvision's ResNet adapted to small images (32x32): a 3x3 stride-1 stem and no max pool.
class ResNet : public Module {
 public:
  ResNet(bool bottleneck, const std::vector<int64_t>& layers, int64_t classes, int64_t in_channels);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<Linear> fc;
};
std::shared_ptr<ResNet> resnet18(int64_t classes = 10, int64_t in_channels = 3);  // 11,173,962 params at 10 classes
std::shared_ptr<ResNet> resnet50(int64_t classes = 10, int64_t in_channels = 3);  // 23,520,842 params at 10 classes

// EfficientNet-B0 as torchvision builds it (5,288,548 params at 1000 classes, 3 channels), with
// an option to keep the stem at stride 1 for small images. No stochastic depth.
std::shared_ptr<Sequential> efficientnet_b0(int64_t classes = 10, int64_t in_channels = 3, bool small_input = true);

// EfficientNetV2-B0 as Keras builds it: 7,139,704 params at 1000 classes, 3 channels (Keras's
// trainable count; its 60,608 non-trainable ones are the BatchNorms' running means and variances,
// buffers here). Same stem option; no stochastic depth.
std::shared_ptr<Sequential> efficientnet_v2_b0(int64_t classes = 10, int64_t in_channels = 3, bool small_input = true);

struct ViTOptions {
  int64_t image_size = 28, patch_size = 7, in_channels = 1, classes = 10;
  int64_t dim = 64, depth = 4, heads = 4, mlp_dim = 128;
  double dropout = 0.0;
};
class ViT : public Module {
 public:
  explicit ViT(ViTOptions o = {});
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<PatchEmbedding> embed;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;
  ViTOptions opts;
};

struct GPTOptions {
  int64_t vocab_size = 65, context = 256, n_layer = 6, n_head = 6, n_embd = 384;
  double dropout = 0.0;
};
// Decoder-only transformer: token + position embeddings, causal pre-norm blocks, final LayerNorm,
// a bias-free head (not tied to the token embedding). forward: int tokens (B, T) -> logits (B, T, V).
class GPT : public Module {
 public:
  explicit GPT(GPTOptions o = {});
  Tensor forward(const Tensor& tokens) override;
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<ModuleList> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;
  GPTOptions opts;
};

}  // namespace mdl::nn::models
