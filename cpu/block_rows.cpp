// copy_block_u16(_even), add_block_f32 and fold_plane_f32: the AVX-512 rows where the CPU has them, else plain
// loops.
#include "cpu/block_rows.h"

#include "cpu/cpu_features.h"

namespace mdl::cpu {

void copy_block_u16(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                    int64_t n) {
  if (has_avx512bw()) return detail::copy_block_u16_avx512(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] = src[r * src_stride + j];
}

void copy_block_u16_even(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                         int64_t n) {
  if (has_avx512bw()) return detail::copy_block_u16_even_avx512(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] = src[r * src_stride + 2 * j];
}

void add_block_f32(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t n) {
  if (has_avx512f()) return detail::add_block_f32_avx512(dst, dst_stride, src, src_stride, rows, n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) dst[r * dst_stride + j] += src[r * src_stride + j];
}

void fold_plane_f32(float* dx, int64_t H, int64_t W, const float* taps, int64_t tap_stride, int64_t kh, int64_t kw,
                    int64_t Ho, int64_t Wo, int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w) {
  if (has_avx512f())
    return detail::fold_plane_f32_avx512(dx, H, W, taps, tap_stride, kh, kw, Ho, Wo, pad_h, pad_w, stride_h, stride_w);
  for (int64_t ih = 0; ih < H; ++ih)
    for (int64_t iw = 0; iw < W; ++iw) {
      float acc = 0.0f;
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t rh = ih + pad_h - ki;  // oh * stride_h
        if (rh < 0 || rh % stride_h != 0 || rh / stride_h >= Ho) continue;
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int64_t rw = iw + pad_w - kj;
          if (rw >= 0 && rw % stride_w == 0 && rw / stride_w < Wo)
            acc += taps[(ki * kw + kj) * tap_stride + rh / stride_h * Wo + rw / stride_w];
        }
      }
      dx[ih * W + iw] += acc;
    }
}

}  // namespace mdl::cpu
