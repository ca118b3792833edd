// Direct convolution for stride 1 and dilation 1 (the 3x3 convs of most CNNs): each tile of the
// output is accumulated in vector registers from shifted rows of the zero-padded input, with the
// bias folded in, instead of unfolding the input into a column matrix for a GEMM. Its backward to
// the input is the same kernel over the output gradient with the weights flipped and transposed.
// AVX-512 (16 lanes) or AVX2 + FMA (8 lanes), chosen at run time; f32 only.
#pragma once
#include <cstdint>

#include "kernels/conv.h"
#include "tensor/tensor.h"

namespace mdl::cpu {


// Which kernel the direct path runs here: "avx512f 4x6x16", "avx2-fma 3x3x8", or nullptr where the
// CPU has neither or the switch is off.
const char* direct_conv_kernel_name();

// f32, stride 1, dilation 1, not depthwise (one input channel per group, unless there is only
// one group), a CPU with AVX2 + FMA or AVX-512, and the switch on.
bool direct_conv_applies(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p);
// out (N, Cout, Ho, Wo) contiguous = conv(x, w) + b, for a conv direct_conv_applies to.
void direct_conv2d_forward(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                           const kernels::Conv2dParams& p);
// grad_w (Cout, Cin/G, kh, kw) and grad_b (Cout, or undefined), both contiguous, for a conv
// direct_conv_applies to.
void direct_conv2d_backward_weight(const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                                   const kernels::Conv2dParams& p);
// Whether conv2d_backward computes the weight gradient with the direct loop: on AVX-512 (32
// registers hold its 2 channels x 9 taps), or with one input channel per group. The AVX2 loop,
// with 16 registers, splits the taps and re-reads its rows: on a Zen 3 im2col + GEMM took 14.7 ms
// where it took 24.6 (SimpleCNN's second conv), 33.2 against 43.5 (a ResNet 3x3 64 -> 64).
bool direct_weight_grad_pays(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p);
// grad_x (N, Cin, H, W) contiguous from grad_out; needs the padding at most the kernel size - 1.
bool direct_conv_backward_input_applies(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p);
void direct_conv2d_backward_input(const Tensor& gx, const Tensor& go, const Tensor& w, const kernels::Conv2dParams& p);

namespace detail {

// One sample and group, as the ISA kernels see it. xp: the sample's zero-padded input for the
// group, cin planes of `plane` floats, rows `wq` floats apart (input pixel (ih, iw) at
// (ih + pad_h, iw + pad_w)); w: the group's weights packed by blocks of the ISA's K =
// kDirectChannels output channels, w[(((co / K * cin + c) * kh + ki) * kw + kj) * K + co % K],
// zero past cout; bias: the group's or null; out: the group's first output plane of the sample,
// (cout, ho, wo) contiguous.
struct DirectConvPlane {
  const float* xp;
  int64_t plane, wq;
  const float* w;
  int64_t cin, kh, kw;
  const float* bias;
  float* out;
  int64_t ho, wo;
  int64_t c0 = 0, c1 = 0;  // the input channels a call sums, set by the loop itself
};
// Output channels [co0, co1) of the plane.
void direct_conv_plane_avx512(const DirectConvPlane& a, int64_t co0, int64_t co1);
void direct_conv_plane_avx2(const DirectConvPlane& a, int64_t co0, int64_t co1);
inline constexpr int kDirectLanesAvx512 = 16, kDirectLanesAvx2 = 8;
inline constexpr int kDirectChannelsAvx512 = 4, kDirectChannelsAvx2 = 3;

// A block of samples for the weight gradient of one input channel c (the kernels' argument) of
// one group. xp: the channel's zero-padded rows as in DirectConvPlane, kw times over, the copy
// for kernel column kj `shifted` floats after the first and moved left by kj columns, so that
// every row load is aligned (wq a whole number of vectors, rows 64-byte aligned); sample n's
// copies at xp + n * xp_sample. go: the group's first output channel of sample 0, (samples, .,
// ho, wo) with go_sample floats per sample. gw: the group's (cout, cin, kh, kw), accumulated into.
struct DirectConvWeightGrad {
  const float* xp;
  int64_t wq, shifted, xp_sample;
  const float* go;
  int64_t go_sample, ho, wo;
  int64_t samples, cin, kh, kw;
  float* gw;
};
// grad_w[co + i, c] for i < r, r at most weight_grad_channels (avx512: 2, avx2: 2).
void direct_conv_weight_grad_avx512(const DirectConvWeightGrad& a, int64_t co, int r, int64_t c);
void direct_conv_weight_grad_avx2(const DirectConvWeightGrad& a, int64_t co, int r, int64_t c);
inline constexpr int kWeightGradChannels = 2;

}  // namespace detail

}  // namespace mdl::cpu
