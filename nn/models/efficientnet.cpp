// EfficientNet-B0 from MBConv blocks (nn/models/mbconv.h): a 3x3 stem, seven stages of MBConv,
// a 1x1 head conv to 1280 channels, pooling and the classifier. Layout and names as torchvision's.
#include "nn/models/mbconv.h"
#include "nn/models/models.h"

namespace mdl::nn::models {

namespace {
constexpr double kBnEps = 1e-5;  // torchvision's B0 (nn.BatchNorm2d's default); its B5-B7 and V2 use 1e-3
}

std::shared_ptr<Sequential> efficientnet_b0(int64_t classes, int64_t in_channels, bool small_input) {
  struct Stage {
    int64_t expand, k, stride, in, out, layers;
  };
  const Stage stages[] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},  {6, 3, 2, 40, 80, 3},
                          {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1}};
  auto features = std::make_shared<Sequential>();
  features->push_back(conv_bn_act(in_channels, 32, 3, small_input ? 1 : 2, 1, true, kBnEps));
  for (const Stage& s : stages) {
    auto stage = std::make_shared<Sequential>();
    for (int64_t i = 0; i < s.layers; ++i)
      stage->push_back(
          std::make_shared<MBConv>(s.expand, s.k, i == 0 ? s.stride : 1, i == 0 ? s.in : s.out, s.out, kBnEps));
    features->push_back(stage);
  }
  features->push_back(conv_bn_act(320, 1280, 1, 1, 1, true, kBnEps));
  return efficientnet_with_head(features, 1280, classes);
}

}  // namespace mdl::nn::models
