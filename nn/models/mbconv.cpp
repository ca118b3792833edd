// The EfficientNet blocks: each one a Sequential named "block", plus the input when shapes allow.
#include "nn/models/mbconv.h"

#include <algorithm>

#include "ops/ops.h"

namespace mdl::nn::models {

std::shared_ptr<Sequential> conv_bn_act(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups, bool act,
                                        double bn_eps) {
  auto s = std::make_shared<Sequential>();
  s->push_back(std::make_shared<Conv2d>(in, out, k,
                                        Conv2dOptions{.stride = {stride, stride},
                                                      .padding = {(k - 1) / 2, (k - 1) / 2},
                                                      .groups = groups,
                                                      .bias = false}));
  s->push_back(std::make_shared<BatchNorm2d>(out, bn_eps));
  if (act) s->push_back(std::make_shared<SiLU>());
  return s;
}

std::shared_ptr<Sequential> efficientnet_with_head(std::shared_ptr<Sequential> features, int64_t channels,
                                                   int64_t classes) {
  auto m = std::make_shared<Sequential>();
  m->push_back("features", std::move(features));
  m->push_back("avgpool", std::make_shared<AdaptiveAvgPool2d>(1));
  m->push_back("flatten", std::make_shared<Flatten>());
  m->push_back("classifier", std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
                                 std::make_shared<Dropout>(0.2), std::make_shared<Linear>(channels, classes)}));
  return m;
}

SqueezeExcitation::SqueezeExcitation(int64_t channels, int64_t squeeze) : Module("SqueezeExcitation") {
  fc1 = register_module("fc1", std::make_shared<Conv2d>(channels, squeeze, 1));
  fc2 = register_module("fc2", std::make_shared<Conv2d>(squeeze, channels, 1));
}

Tensor SqueezeExcitation::forward(const Tensor& x) {
  Tensor s = functional::adaptive_avg_pool2d(x, {1, 1});
  return x * sigmoid((*fc2)(silu((*fc1)(s))));
}

MBConv::MBConv(int64_t expand, int64_t k, int64_t stride, int64_t in, int64_t out, double bn_eps) : Module("MBConv") {
  residual = stride == 1 && in == out;
  const int64_t hidden = in * expand;
  block = std::make_shared<Sequential>();
  if (expand != 1) block->push_back(conv_bn_act(in, hidden, 1, 1, 1, true, bn_eps));
  block->push_back(conv_bn_act(hidden, hidden, k, stride, hidden, true, bn_eps));  // depthwise
  block->push_back(std::make_shared<SqueezeExcitation>(hidden, std::max<int64_t>(1, in / 4)));
  block->push_back(conv_bn_act(hidden, out, 1, 1, 1, false, bn_eps));
  register_module("block", block);
}

Tensor MBConv::forward(const Tensor& x) {
  Tensor y = (*block)(x);
  return residual ? y + x : y;
}

FusedMBConv::FusedMBConv(int64_t expand, int64_t k, int64_t stride, int64_t in, int64_t out, double bn_eps)
    : Module("FusedMBConv") {
  residual = stride == 1 && in == out;
  block = std::make_shared<Sequential>();
  if (expand != 1) {
    block->push_back(conv_bn_act(in, in * expand, k, stride, 1, true, bn_eps));  // the fused expansion
    block->push_back(conv_bn_act(in * expand, out, 1, 1, 1, false, bn_eps));     // the projection
  } else {
    block->push_back(conv_bn_act(in, out, k, stride, 1, true, bn_eps));
  }
  register_module("block", block);
}

Tensor FusedMBConv::forward(const Tensor& x) {
  Tensor y = (*block)(x);
  return residual ? y + x : y;
}

}  // namespace mdl::nn::models
