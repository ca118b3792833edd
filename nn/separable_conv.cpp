// SeparableConv2d: a depthwise conv then a pointwise (1x1) conv, two Conv2d children.
#include "nn/separable_conv.h"

#include <sstream>

namespace mdl::nn {

SeparableConv2d::SeparableConv2d(int64_t in, int64_t out, Pair k, SeparableConv2dOptions o)
    : Module("SeparableConv2d"), in_channels(in), out_channels(out), opts(o) {
  MDL_CHECK(in > 0 && out > 0, "SeparableConv2d: channels must be positive, got in_channels ", in, " and out_channels ",
            out);
  MDL_CHECK(o.depth_multiplier > 0, "SeparableConv2d: depth_multiplier must be positive, got ", o.depth_multiplier);
  const int64_t mid = in * o.depth_multiplier;
  depthwise = register_module("depthwise", std::make_shared<Conv2d>(in, mid, k,
                                                                    Conv2dOptions{.stride = o.stride,
                                                                                  .padding = o.padding,
                                                                                  .dilation = o.dilation,
                                                                                  .groups = in,
                                                                                  .bias = false}));
  pointwise = register_module("pointwise", std::make_shared<Conv2d>(mid, out, 1, Conv2dOptions{.bias = o.bias}));
}

Tensor SeparableConv2d::forward(const Tensor& x) { return (*pointwise)((*depthwise)(x)); }

std::string SeparableConv2d::extra_repr() const {
  std::ostringstream s;
  s << in_channels << ", " << out_channels << ", depth_multiplier=" << opts.depth_multiplier;
  return s.str();
}

}  // namespace mdl::nn
