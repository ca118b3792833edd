// EfficientNetV2-B0 as Keras's EfficientNetV2B0 builds it (width and depth 1.0): a 3x3 stride-2
// stem to 32 channels, three stages of Fused-MBConv (no squeeze-and-excitation), three of MBConv
// with squeeze-and-excitation (squeezed to a quarter of the block's input channels), a 1x1 head
// conv to 1280 channels, pooling, dropout 0.2 and the classifier. Blocks and names as torchvision's
// efficientnet_v2_*. No stochastic depth.
#include "nn/models/mbconv.h"
#include "nn/models/models.h"

namespace mdl::nn::models {

namespace {
constexpr double kBnEps = 1e-3;
}

std::shared_ptr<Sequential> efficientnet_v2_b0(int64_t classes, int64_t in_channels, bool small_input) {
  struct Stage {
    bool fused;
    int64_t expand, k, stride, in, out, layers;
  };
  const Stage stages[] = {{true, 1, 3, 1, 32, 16, 1},  {true, 4, 3, 2, 16, 32, 2},   {true, 4, 3, 2, 32, 48, 2},
                          {false, 4, 3, 2, 48, 96, 3}, {false, 6, 3, 1, 96, 112, 5}, {false, 6, 3, 2, 112, 192, 8}};
  auto features = std::make_shared<Sequential>();
  features->push_back(conv_bn_act(in_channels, 32, 3, small_input ? 1 : 2, 1, true, kBnEps));
  for (const Stage& s : stages) {
    auto stage = std::make_shared<Sequential>();
    for (int64_t i = 0; i < s.layers; ++i) {
      const int64_t stride = i == 0 ? s.stride : 1, in = i == 0 ? s.in : s.out;
      if (s.fused) stage->push_back(std::make_shared<FusedMBConv>(s.expand, s.k, stride, in, s.out, kBnEps));
      else stage->push_back(std::make_shared<MBConv>(s.expand, s.k, stride, in, s.out, kBnEps));
    }
    features->push_back(stage);
  }
  features->push_back(conv_bn_act(192, 1280, 1, 1, 1, true, kBnEps));
  return efficientnet_with_head(features, 1280, classes);
}

}  // namespace mdl::nn::models
