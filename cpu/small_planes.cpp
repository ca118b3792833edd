// unfold_small_planes_u16 and fold_small_planes_f32: the AVX-512 permutes where the CPU has them,
// else a plain loop and fold_plane_f32 plane by plane.
#include "cpu/small_planes.h"

#include "cpu/block_rows.h"
#include "cpu/cpu_features.h"

namespace mdl::cpu {

bool fits_small_planes(const SmallPlaneGeom& g) { return g.H * g.W <= 16 && g.Ho * g.Wo <= 16; }

void unfold_small_planes_u16(const SmallPlaneGeom& g, const uint16_t* x, int64_t x_stride, int64_t planes,
                             uint16_t* col, int64_t tap_stride, int64_t col_stride) {
  if (has_avx512bw())
    return detail::unfold_small_planes_u16_avx512(g, x, x_stride, planes, col, tap_stride, col_stride);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        uint16_t* out = col + (ki * g.kw + kj) * tap_stride + p * col_stride;
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t ih = oh * g.stride_h + ki - g.pad_h, iw = ow * g.stride_w + kj - g.pad_w;
            const bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
            out[oh * g.Wo + ow] = inside ? x[p * x_stride + ih * g.W + iw] : uint16_t(0);
          }
      }
}

void fold_small_planes_f32(const SmallPlaneGeom& g, const float* taps, int64_t tap_stride, int64_t taps_stride,
                           int64_t planes, float* dx, int64_t dx_stride) {
  if (has_avx512f())
    return detail::fold_small_planes_f32_avx512(g, taps, tap_stride, taps_stride, planes, dx, dx_stride);
  for (int64_t p = 0; p < planes; ++p)
    fold_plane_f32(dx + p * dx_stride, g.H, g.W, taps + p * taps_stride, tap_stride, g.kh, g.kw, g.Ho, g.Wo, g.pad_h,
                   g.pad_w, g.stride_h, g.stride_w);
}

}  // namespace mdl::cpu
