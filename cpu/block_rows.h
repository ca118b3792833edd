// Row-by-row copies and sums of small 2-D blocks for the unfolding and folding of convs
// (cpu/conv.cpp), and the fold of a small plane, whose rows are a feature map's width: 7 to 28 values in most CNNs, too short for
// a vectorized loop to leave its scalar tail. On AVX-512 each row of up to 32 16-bit values or 16
// floats is one masked load and one masked store (cpu/block_rows_avx512.cpp).
#pragma once
#include <cstdint>

namespace mdl::cpu {

// dst[r * dst_stride + j] = src[r * src_stride + j] for r < rows, j < n: 16-bit values (bf16 and
// f16, as their bits). The blocks do not overlap.
void copy_block_u16(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                    int64_t n);
// dst[r * dst_stride + j] = src[r * src_stride + 2 * j] for r < rows, j < n: every other value of
// each source row (the unfolding of a stride-2 conv). Reads no source value past the last it copies.
void copy_block_u16_even(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                         int64_t n);
// dst[r * dst_stride + j] += src[r * src_stride + j] for r < rows, j < n. The blocks do not overlap.
void add_block_f32(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t n);

// The fold (col2im) of one (sample, channel) plane of a dilation-1 conv of stride 1 or 2 along each
// dim: dx (H x W, contiguous) += for each tap (ki, kj) in order, ki * kw + kj, the tap's plane
// (Ho x Wo, contiguous, at taps + (ki * kw + kj) * tap_stride) placed at (ki - pad_h, kj - pad_w)
// with its rows stride_h and its columns stride_w apart:
//   dx[ih][iw] += sum over taps of tap[oh][ow], ih = oh * stride_h + ki - pad_h, iw = ow * stride_w + kj - pad_w,
// the taps summed first (from 0, in tap order) and their sum added to dx once. Each output gathers its
// taps in registers: adding shifted rows into one buffer instead makes every add wait on a store
// it partly overlaps.
void fold_plane_f32(float* dx, int64_t H, int64_t W, const float* taps, int64_t tap_stride, int64_t kh, int64_t kw,
                    int64_t Ho, int64_t Wo, int64_t pad_h, int64_t pad_w, int64_t stride_h = 1, int64_t stride_w = 1);

namespace detail {
// On a CPU with AVX-512BW only.
void copy_block_u16_avx512(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                           int64_t n);
void copy_block_u16_even_avx512(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride,
                                int64_t rows, int64_t n);
// On a CPU with AVX-512F only.
void add_block_f32_avx512(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                          int64_t n);
void fold_plane_f32_avx512(float* dx, int64_t H, int64_t W, const float* taps, int64_t tap_stride, int64_t kh,
                           int64_t kw, int64_t Ho, int64_t Wo, int64_t pad_h, int64_t pad_w, int64_t stride_h = 1,
                           int64_t stride_w = 1);
}  // namespace detail

}  // namespace mdl::cpu
