// The unfolding (im2col) and folding (col2im) of a conv over maps of at most 16 values (ResNet's
// 4x4 stage): a whole (sample, channel) plane fits one vector, so each tap's values are one permute
// of it, the padding's lanes masked to zero, where the row-by-row copies and sums (block_rows.h)
// move 4 values a row. The permutes' indices depend on the conv's geometry alone and are worked out
// once per call. AVX-512 (BW for the 16-bit unfolding); elsewhere a plain loop, and fold_plane_f32.
#pragma once
#include <cstdint>

namespace mdl::cpu {

// A conv's geometry as the planes see it (dilation 1).
struct SmallPlaneGeom {
  int64_t H, W, kh, kw, Ho, Wo, pad_h, pad_w, stride_h, stride_w;
};

// Whether both the input and the output plane hold at most 16 values.
bool fits_small_planes(const SmallPlaneGeom& g);

// For planes p < planes, x_p = x + p * x_stride (H x W, contiguous), and taps t = ki * kw + kj:
//   col[t * tap_stride + p * col_stride + oh * Wo + ow] = x_p[ih * W + iw],
//   ih = oh * stride_h + ki - pad_h, iw = ow * stride_w + kj - pad_w, or 0 where (ih, iw) is padding.
// 16-bit values (bf16 and f16, as their bits).
void unfold_small_planes_u16(const SmallPlaneGeom& g, const uint16_t* x, int64_t x_stride, int64_t planes,
                             uint16_t* col, int64_t tap_stride, int64_t col_stride);
// The other way: dx_p = dx + p * dx_stride (H x W, contiguous) += for each input value the sum, from
// 0 in tap order, of the tap values (taps + p * taps_stride + t * tap_stride, Ho x Wo each) the
// unfolding took from it: fold_plane_f32's result, bit for bit.
void fold_small_planes_f32(const SmallPlaneGeom& g, const float* taps, int64_t tap_stride, int64_t taps_stride,
                           int64_t planes, float* dx, int64_t dx_stride);

namespace detail {
// On a CPU with AVX-512BW only.
void unfold_small_planes_u16_avx512(const SmallPlaneGeom& g, const uint16_t* x, int64_t x_stride, int64_t planes,
                                    uint16_t* col, int64_t tap_stride, int64_t col_stride);
// On a CPU with AVX-512F only.
void fold_small_planes_f32_avx512(const SmallPlaneGeom& g, const float* taps, int64_t tap_stride, int64_t taps_stride,
                                  int64_t planes, float* dx, int64_t dx_stride);
}  // namespace detail

}  // namespace mdl::cpu
