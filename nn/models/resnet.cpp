// ResNet (BasicBlock, Bottleneck) for small images, with torchvision's parameter names.
#include "nn/models/models.h"
#include "ops/ops.h"

namespace mdl::nn::models {

namespace {
std::shared_ptr<Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<Conv2d>(in, out, 3,
                                  Conv2dOptions{.stride = {stride, stride}, .padding = {1, 1}, .bias = false});
}
std::shared_ptr<Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<Conv2d>(in, out, 1, Conv2dOptions{.stride = {stride, stride}, .bias = false});
}
std::shared_ptr<Sequential> shortcut(int64_t in, int64_t out, int64_t stride) {
  if (stride == 1 && in == out) return nullptr;
  return std::make_shared<Sequential>(
      std::initializer_list<ModulePtr>{conv1x1(in, out, stride), std::make_shared<BatchNorm2d>(out)});
}
}  // namespace

BasicBlock::BasicBlock(int64_t in, int64_t planes, int64_t stride) : Module("BasicBlock") {
  conv1 = register_module("conv1", conv3x3(in, planes, stride));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, 1));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  if ((downsample = shortcut(in, planes, stride))) register_module("downsample", downsample);
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu((*conv1)(x));
  const Tensor identity = downsample ? (*downsample)(x) : x;
  return bn2->forward_add_relu((*conv2)(out), identity);
}

Bottleneck::Bottleneck(int64_t in, int64_t planes, int64_t stride) : Module("Bottleneck") {
  conv1 = register_module("conv1", conv1x1(in, planes, 1));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * expansion, 1));
  bn3 = register_module("bn3", std::make_shared<BatchNorm2d>(planes * expansion));
  if ((downsample = shortcut(in, planes * expansion, stride))) register_module("downsample", downsample);
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu((*conv1)(x));
  out = bn2->forward_relu((*conv2)(out));
  const Tensor identity = downsample ? (*downsample)(x) : x;
  return bn3->forward_add_relu((*conv3)(out), identity);
}

ResNet::ResNet(bool bottleneck, const std::vector<int64_t>& layers, int64_t classes, int64_t in_channels)
    : Module("ResNet") {
  MDL_CHECK(layers.size() == 4, "ResNet: expected 4 stage depths, got ", layers.size());
  conv1 = register_module("conv1", conv3x3(in_channels, 64, 1));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  int64_t in = 64, expansion = bottleneck ? Bottleneck::expansion : BasicBlock::expansion;
  auto stage = [&](int64_t planes, int64_t blocks, int64_t stride) {
    auto s = std::make_shared<Sequential>();
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t st = b == 0 ? stride : 1;
      if (bottleneck) s->push_back(std::make_shared<Bottleneck>(in, planes, st));
      else s->push_back(std::make_shared<BasicBlock>(in, planes, st));
      in = planes * expansion;
    }
    return s;
  };
  layer1 = register_module("layer1", stage(64, layers[0], 1));
  layer2 = register_module("layer2", stage(128, layers[1], 2));
  layer3 = register_module("layer3", stage(256, layers[2], 2));
  layer4 = register_module("layer4", stage(512, layers[3], 2));
  fc = register_module("fc", std::make_shared<Linear>(512 * expansion, classes));
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor h = bn1->forward_relu((*conv1)(x));
  h = (*layer4)((*layer3)((*layer2)((*layer1)(h))));
  h = functional::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
  return (*fc)(h);
}

std::shared_ptr<ResNet> resnet18(int64_t classes, int64_t in_channels) {
  return std::make_shared<ResNet>(false, std::vector<int64_t>{2, 2, 2, 2}, classes, in_channels);
}
std::shared_ptr<ResNet> resnet50(int64_t classes, int64_t in_channels) {
  return std::make_shared<ResNet>(true, std::vector<int64_t>{3, 4, 6, 3}, classes, in_channels);
}

}  // namespace mdl::nn::models
