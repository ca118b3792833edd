// The blocks of the EfficientNet family, shared by efficientnet.cpp (B0) and efficientnet_v2.cpp
// (V2-B0): Conv-BN(-SiLU), squeeze-and-excitation, MBConv (1x1 expansion, depthwise kxk conv,
// squeeze-and-excitation, 1x1 projection) and Fused-MBConv (the expansion and the depthwise conv
// fused into one full kxk conv, no squeeze-and-excitation). Names as torchvision's.
#pragma once
#include <memory>

#include "nn/container.h"
#include "nn/layers.h"

namespace mdl::nn::models {

// Conv(k x k, "same" padding, no bias)-BatchNorm(eps)(-SiLU): torchvision's Conv2dNormActivation.
std::shared_ptr<Sequential> conv_bn_act(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups, bool act,
                                        double bn_eps);

// The model around its feature extractor, as torchvision names it: features (ending in `channels`
// maps), avgpool, flatten, classifier (dropout 0.2, linear channels -> classes).
std::shared_ptr<Sequential> efficientnet_with_head(std::shared_ptr<Sequential> features, int64_t channels,
                                                   int64_t classes);

// x * sigmoid(fc2(silu(fc1(avgpool(x))))), fc1 and fc2 1x1 convs with bias.
class SqueezeExcitation : public Module {
 public:
  SqueezeExcitation(int64_t channels, int64_t squeeze);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> fc1, fc2;
};

// hidden = in * expand; block: [1x1 in->hidden, BN, SiLU] (when expand > 1), depthwise kxk stride s
// hidden->hidden, BN, SiLU, squeeze-and-excitation (hidden, squeezed to in / 4), 1x1 hidden->out, BN;
// plus x when stride is 1 and in == out.
class MBConv : public Module {
 public:
  MBConv(int64_t expand, int64_t k, int64_t stride, int64_t in, int64_t out, double bn_eps);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Sequential> block;
  bool residual;
};

// expand > 1: kxk stride s in->in*expand, BN, SiLU, then 1x1 ->out, BN (no activation);
// expand == 1: kxk stride s in->out, BN, SiLU. Plus x when stride is 1 and in == out.
class FusedMBConv : public Module {
 public:
  FusedMBConv(int64_t expand, int64_t k, int64_t stride, int64_t in, int64_t out, double bn_eps);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Sequential> block;
  bool residual;
};

}  // namespace mdl::nn::models
