// Direct convolution for stride 1 and dilation 1 (the 3x3 convs of most CNNs): each tile of the
// output is accumulated in vector registers from shifted rows of the zero-padded input, with the
// bias folded in, instead of unfolding the input into a column matrix for a GEMM. Its backward to
// the input is the same kernel over the output gradient with the weights flipped and transposed.
// AVX-512 (16 lanes) or AVX2 + FMA (8 lanes), chosen at run time. f32, and bf16 (autocast bf16):
// bf16 operands are read straight into the tiles' padded buffers and the outputs rounded once, no
// f32 copy made around the conv; the row tile multiplies bf16 pairs where VDPBF16PS runs.
#pragma once
#include <cstdint>

#include "kernels/conv.h"
#include "tensor/tensor.h"

namespace mdl::cpu {


// Which kernel the direct path runs here: "avx512f 4x6x16", "avx2-fma 3x3x8", or nullptr where the
// CPU has neither or the switch is off.
const char* direct_conv_kernel_name();

// x and w both f32 or both bf16 (each output and gradient f32 or bf16), stride 1, dilation 1, not
// depthwise (one input channel per group, unless there is only one group), a CPU with AVX2 + FMA
// or AVX-512, and the switch on; for bf16 values (bf16 tensors, or Conv2dParams::bf16_values),
// also that AMX does not take them (gemm_bf16_values_kernel).
// Their row tile multiplies bf16 pairs where the bf16 GEMM kernel is VDPBF16PS or its emulation.
bool direct_conv_applies(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p);
// out (N, Cout, Ho, Wo) contiguous = conv(x, w) + b, for a conv direct_conv_applies to.
void direct_conv2d_forward(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                           const kernels::Conv2dParams& p);
// grad_w (Cout, Cin/G, kh, kw) and grad_b (Cout, or undefined), both contiguous, for a conv
// direct_conv_applies to.
void direct_conv2d_backward_weight(const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                                   const kernels::Conv2dParams& p);
// Whether conv2d_backward computes the weight gradient with the direct loop
// (cpu/conv_weight_grad.cpp): on AVX-512, or with several input channels per group. With one,
// an AVX2 tile holds 8 output channels, and transposing grad_out costs as much as its FMAs: on an
// Ice Lake forced to AVX2, SimpleCNN's first conv took 4.2 ms there against im2col's 2.9, its
// second 10.1 against 16.5.
bool direct_weight_grad_pays(const Tensor& x, const Tensor& w, const kernels::Conv2dParams& p);
// Whether the forward and the input gradient of a conv direct_conv_applies to run the direct loop:
// unless a group's weights exceed 1 MiB as f32 (the im2col_large_weights switch; the loop reads
// them again for every output tile, from L3 once they outgrow L2). The weight gradient runs direct
// either way.
bool direct_conv_weights_fit(const Tensor& w, const kernels::Conv2dParams& p);
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

// The other forward tile, for convs with several input and output channels per group
// (cpu/conv_gemm_impl.h): an implicit GEMM with lanes over output channels, one output row of a
// sample and group. xp: as in DirectConvPlane, rows wq floats apart. wt: the group's packed
// weights, input channel c's tap t at row c * kh * kw + t of cop floats (output channels, cop
// rounded up to whole vectors, zeros past them). bias: cop floats, or null. out: the group's
// output for the sample transposed, pixel p = oh * wo + ow's cop channels at out + p * cop.
// E: float, or for bf16 values uint32_t, a pair of input channels (2c, 2c + 1) rounded to bf16 per
// element (the low half channel 2c), cin then counting the pairs (an odd channel count gets a zero
// channel).
template <class E>
struct ConvGemmRowOf {
  const E* xp;
  int64_t plane, wq;
  const E* wt;
  int64_t cop, cin, kh, kw;
  const float* bias;
  float* out;
  int64_t wo;
};
using ConvGemmRow = ConvGemmRowOf<float>;
using ConvGemmRowPairs = ConvGemmRowOf<uint32_t>;
// k pixels from (oh, ow0) (k at most the ISA's kConvRowPixels), nv vectors of output channels from
// co (nv at most its kConvRowVectors).
void conv_gemm_row_avx512(const ConvGemmRow& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv);
void conv_gemm_row_avx2(const ConvGemmRow& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv);
inline constexpr int kConvRowPixelsAvx512 = 8, kConvRowVectorsAvx512 = 2;
inline constexpr int kConvRowPixelsAvx2 = 8, kConvRowVectorsAvx2 = 1;
// The row tile on bf16 pairs, AVX-512's geometry (16 lanes, 8 pixels, 2 vectors): by VDPBF16PS
// (cpu/bf16_pairs_avx512bf16.cpp; a CPU with AVX512-BF16), or with each VDPBF16PS written as two
// FMAs (cpu/bf16_pairs_avx512.cpp; any AVX-512 CPU: the same results, denormals aside).
using ConvGemmRowPairsFn = void (*)(const ConvGemmRowPairs&, int64_t, int64_t, int, int64_t, int);
void conv_gemm_row_bf16(const ConvGemmRowPairs& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv);
void conv_gemm_row_bf16_emulated(const ConvGemmRowPairs& a, int64_t oh, int64_t ow0, int k, int64_t co, int nv);
// out[i] = the pair (bf16(lo[i]), bf16(hi[i])) for i < n, hi null: zeros (AVX-512F, nearest even).
void bf16_pairs_avx512(const float* lo, const float* hi, int64_t n, uint32_t* out);

// One tile of the weight gradient as an implicit GEMM (cpu/conv_weight_grad_impl.h), lanes over
// output channels. gt: the group's output gradient transposed, sample n's pixel p (of ho * wo)
// and output channel co at gt[(n * ho * wo + p) * cop + co], cop the group's output channels
// rounded up to whole vectors (zeros past them). xp: the tile's input channel, sample n's
// zero-padded plane at xp + n * xp_sample, rows wp floats apart (input pixel (ih, iw) at (ih +
// pad_h, iw + pad_w)). acc: the channel's grad_w^T rows, tap t's at acc + t * cop, added to, or
// with `store` overwritten (the first block of samples, so acc needs no zeroing first).
// For bf16 values, E = uint32_t and X = uint16_t: gt holds pairs of adjacent pixels of a row (2e,
// 2e + 1; zero past the row), wo counting the pairs, and xp the padded input in bf16, rows wp
// values apart with a zero past the padding (a pair read at the row's last pixel stays in it).
template <class E, class X>
struct WeightGradTileOf {
  const E* gt;
  int64_t cop;
  const X* xp;
  int64_t xp_sample, wp;
  int64_t ho, wo, kh, kw;
  int64_t n0, n1;  // the samples summed
  float* acc;
  bool store;
};
using WeightGradTile = WeightGradTileOf<float, float>;
using WeightGradTilePairs = WeightGradTileOf<uint32_t, uint16_t>;
// k taps from t0 (k at most kWeightGradTaps), nv vectors of output channels from co (nv at most
// the ISA's kWeightGradVectors).
void weight_grad_gemm_avx512(const WeightGradTile& a, int64_t t0, int k, int64_t co, int nv);
void weight_grad_gemm_avx2(const WeightGradTile& a, int64_t t0, int k, int64_t co, int nv);
// The same on bf16 pairs, AVX-512's geometry: by VDPBF16PS, or emulated (as conv_gemm_row_bf16).
using WeightGradPairsFn = void (*)(const WeightGradTilePairs&, int64_t, int, int64_t, int);
void weight_grad_gemm_bf16(const WeightGradTilePairs& a, int64_t t0, int k, int64_t co, int nv);
void weight_grad_gemm_bf16_emulated(const WeightGradTilePairs& a, int64_t t0, int k, int64_t co, int nv);
// dst[i] = bf16(src[i]) as bits, for i < n (AVX-512F, nearest even, NaN kept).
void bf16_bits_avx512(const float* src, int64_t n, uint16_t* dst);
inline constexpr int kWeightGradTaps = 9;
// dst[q * dst_stride + r] = src[r * src_stride + q] for r < rows, q < cols (AVX, for both ISAs'
// drivers).
void transpose_rows_avx2(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                         int64_t dst_stride);
inline constexpr int kWeightGradVectorsAvx512 = 2, kWeightGradVectorsAvx2 = 1;

// The loops the direct path runs on this CPU now, following the GEMM kernel choice (so
// ScopedGemmKernel and the avx512_gemm switch reach them too): null for the scalar and AMX
// kernels, or with the direct_conv switch off.
struct DirectIsa {
  void (*plane)(const DirectConvPlane&, int64_t, int64_t);
  void (*weight_grad)(const WeightGradTile&, int64_t, int, int64_t, int);
  void (*row)(const ConvGemmRow&, int64_t, int64_t, int, int64_t, int);
  int64_t lanes, channels;      // a vector's floats; the output channels a forward tile packs together
  int row_pixels, row_vectors;  // the most pixels and vectors of output channels a row tile holds
  int weight_grad_vectors;      // the most vectors of output channels a weight-gradient tile holds
  const char* name;
};
const DirectIsa* direct_isa();

// The tiles on bf16 pairs for a conv's bf16 values, as the bf16 GEMM kernel choice says:
// VDPBF16PS, or its emulation (so ScopedGemmKernel reaches them); null for f32 values and for any
// other kernel, whose f32 tiles then run.
struct DirectPairLoops {
  ConvGemmRowPairsFn row;
  WeightGradPairsFn weight_grad;
};
const DirectPairLoops* direct_pair_loops(const kernels::Conv2dParams& p);

}  // namespace detail

}  // namespace mdl::cpu
