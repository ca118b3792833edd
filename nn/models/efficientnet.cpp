// EfficientNet-B0 from MBConv blocks: 1x1 expansion, depthwise kxk convolution, squeeze-and-
// excitation, 1x1 projection, residual when shapes allow. Layout and names as torchvision's.
#include "nn/models/models.h"
#include "ops/ops.h"

namespace mdl::nn::models {

namespace {
constexpr double kBnEps = 1e-3;

// Conv-BN(-SiLU), torchvision's Conv2dNormActivation.
std::shared_ptr<Sequential> conv_bn_act(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups, bool act) {
  auto s = std::make_shared<Sequential>();
  s->push_back(std::make_shared<Conv2d>(in, out, k,
                                        Conv2dOptions{.stride = {stride, stride},
                                                      .padding = {(k - 1) / 2, (k - 1) / 2},
                                                      .groups = groups,
                                                      .bias = false}));
  s->push_back(std::make_shared<BatchNorm2d>(out, kBnEps));
  if (act) s->push_back(std::make_shared<SiLU>());
  return s;
}

// x * sigmoid(fc2(silu(fc1(avgpool(x))))).
class SqueezeExcitation : public Module {
 public:
  SqueezeExcitation(int64_t channels, int64_t squeeze) : Module("SqueezeExcitation") {
    fc1 = register_module("fc1", std::make_shared<Conv2d>(channels, squeeze, 1));
    fc2 = register_module("fc2", std::make_shared<Conv2d>(squeeze, channels, 1));
  }
  Tensor forward(const Tensor& x) override {
    Tensor s = functional::adaptive_avg_pool2d(x, {1, 1});
    return x * sigmoid((*fc2)(silu((*fc1)(s))));
  }
  std::shared_ptr<Conv2d> fc1, fc2;
};

class MBConv : public Module {
 public:
  MBConv(int64_t expand, int64_t k, int64_t stride, int64_t in, int64_t out) : Module("MBConv") {
    residual = stride == 1 && in == out;
    int64_t hidden = in * expand;
    block = std::make_shared<Sequential>();
    if (expand != 1) block->push_back(conv_bn_act(in, hidden, 1, 1, 1, true));
    block->push_back(conv_bn_act(hidden, hidden, k, stride, hidden, true));  // depthwise
    block->push_back(std::make_shared<SqueezeExcitation>(hidden, std::max<int64_t>(1, in / 4)));
    block->push_back(conv_bn_act(hidden, out, 1, 1, 1, false));
    register_module("block", block);
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*block)(x);
    return residual ? y + x : y;
  }
  std::shared_ptr<Sequential> block;
  bool residual;
};
}  // namespace

std::shared_ptr<Sequential> efficientnet_b0(int64_t classes, int64_t in_channels, bool small_input) {
  struct Stage {
    int64_t expand, k, stride, in, out, layers;
  };
  const Stage stages[] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},  {6, 3, 2, 40, 80, 3},
                          {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1}};
  auto features = std::make_shared<Sequential>();
  features->push_back(conv_bn_act(in_channels, 32, 3, small_input ? 1 : 2, 1, true));
  for (const Stage& s : stages) {
    auto stage = std::make_shared<Sequential>();
    for (int64_t i = 0; i < s.layers; ++i)
      stage->push_back(std::make_shared<MBConv>(s.expand, s.k, i == 0 ? s.stride : 1, i == 0 ? s.in : s.out, s.out));
    features->push_back(stage);
  }
  features->push_back(conv_bn_act(320, 1280, 1, 1, 1, true));
  auto m = std::make_shared<Sequential>();
  m->push_back("features", features);
  m->push_back("avgpool", std::make_shared<AdaptiveAvgPool2d>(1));
  m->push_back("flatten", std::make_shared<Flatten>());
  m->push_back("classifier", std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
                                 std::make_shared<Dropout>(0.2), std::make_shared<Linear>(1280, classes)}));
  return m;
}

}  // namespace mdl::nn::models
