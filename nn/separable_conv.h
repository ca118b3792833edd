// A depthwise separable convolution, as Keras's SeparableConv2D and MobileNet's blocks build it: a
// kH x kW depthwise conv (groups = in_channels, depth_multiplier outputs per channel, no bias),
// then a 1x1 pointwise conv to out_channels. A standard conv costs in * out * kH * kW
// multiply-adds per output pixel; this one in * mult * (kH * kW + out), about kH * kW times fewer
// when out is large: the "lighter architecture" of the training-time studies.
#pragma once
#include <memory>

#include "nn/layers.h"

namespace mdl::nn {

struct SeparableConv2dOptions {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};  // of the depthwise conv
  int64_t depth_multiplier = 1;
  bool bias = true;  // on the pointwise conv
};

class SeparableConv2d : public Module {
 public:
  SeparableConv2d(int64_t in_channels, int64_t out_channels, Pair kernel_size, SeparableConv2dOptions opts = {});
  SeparableConv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, SeparableConv2dOptions opts = {})
      : SeparableConv2d(in_channels, out_channels, Pair{kernel_size, kernel_size}, opts) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  // depthwise.weight (in * mult, 1, kH, kW); pointwise.weight (out, in * mult, 1, 1), pointwise.bias (out)
  std::shared_ptr<Conv2d> depthwise, pointwise;
  int64_t in_channels, out_channels;
  SeparableConv2dOptions opts;
};

}  // namespace mdl::nn
