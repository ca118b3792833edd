// unfold_small_planes_u16 and fold_small_planes_f32 on AVX-512: per tap, a vector of indices into
// the plane and a mask of the lanes it fills (worked out once per call); per plane, one masked load
// of the plane (or of each tap's outputs) and one permute per tap. This file alone is compiled for
// AVX-512F and BW (by pragma).
#include "cpu/small_planes.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <vector>
#define MDL_ISA_TARGET "avx512f,avx512bw"
#include "cpu/isa_target_begin.h"

namespace mdl::cpu::detail {

namespace {

// Lane l of tap t reads lane index[t][l] of the plane it permutes, where bit l of mask[t] is set.
template <class Index>
struct TapLanes {
  std::vector<Index> index;  // (taps, 32): 16-bit lanes use 32, f32 lanes the first 16
  std::vector<uint32_t> mask;
  explicit TapLanes(int64_t taps) : index(size_t(taps * 32), Index(0)), mask(size_t(taps), 0u) {}
};

}  // namespace

void unfold_small_planes_u16_avx512(const SmallPlaneGeom& g, const uint16_t* x, int64_t x_stride, int64_t planes,
                                    uint16_t* col, int64_t tap_stride, int64_t col_stride) {
  const int64_t taps = g.kh * g.kw;
  TapLanes<uint16_t> lanes(taps);  // output lane oh * Wo + ow reads input lane ih * W + iw
  for (int64_t ki = 0; ki < g.kh; ++ki)
    for (int64_t kj = 0; kj < g.kw; ++kj)
      for (int64_t oh = 0; oh < g.Ho; ++oh)
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          const int64_t t = ki * g.kw + kj, ih = oh * g.stride_h + ki - g.pad_h, iw = ow * g.stride_w + kj - g.pad_w;
          if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
          lanes.index[size_t(t * 32 + oh * g.Wo + ow)] = uint16_t(ih * g.W + iw);
          lanes.mask[size_t(t)] |= 1u << (oh * g.Wo + ow);
        }
  const __mmask32 in = __mmask32((1u << (g.H * g.W)) - 1), out = __mmask32((1u << (g.Ho * g.Wo)) - 1);
  for (int64_t p = 0; p < planes; ++p) {
    const __m512i plane = _mm512_maskz_loadu_epi16(in, x + p * x_stride);
    for (int64_t t = 0; t < taps; ++t) {
      const __m512i index = _mm512_loadu_si512(lanes.index.data() + t * 32);
      _mm512_mask_storeu_epi16(col + t * tap_stride + p * col_stride, out,
                               _mm512_maskz_permutexvar_epi16(__mmask32(lanes.mask[size_t(t)]), index, plane));
    }
  }
}

void fold_small_planes_f32_avx512(const SmallPlaneGeom& g, const float* taps, int64_t tap_stride, int64_t taps_stride,
                                  int64_t planes, float* dx, int64_t dx_stride) {
  const int64_t count = g.kh * g.kw;
  TapLanes<int32_t> lanes(count);  // input lane ih * W + iw gathers output lane oh * Wo + ow of each tap
  for (int64_t ki = 0; ki < g.kh; ++ki)
    for (int64_t kj = 0; kj < g.kw; ++kj)
      for (int64_t ih = 0; ih < g.H; ++ih)
        for (int64_t iw = 0; iw < g.W; ++iw) {
          const int64_t t = ki * g.kw + kj, rh = ih + g.pad_h - ki, rw = iw + g.pad_w - kj;
          if (rh < 0 || rh % g.stride_h != 0 || rh / g.stride_h >= g.Ho || rw < 0 || rw % g.stride_w != 0 ||
              rw / g.stride_w >= g.Wo)
            continue;
          lanes.index[size_t(t * 32 + ih * g.W + iw)] = int32_t(rh / g.stride_h * g.Wo + rw / g.stride_w);
          lanes.mask[size_t(t)] |= 1u << (ih * g.W + iw);
        }
  const __mmask16 in = __mmask16((1u << (g.H * g.W)) - 1), out = __mmask16((1u << (g.Ho * g.Wo)) - 1);
  for (int64_t p = 0; p < planes; ++p) {
    const float* tp = taps + p * taps_stride;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t t = 0; t < count; ++t) {
      const __m512i index = _mm512_loadu_si512(lanes.index.data() + t * 32);
      const __m512 values = _mm512_maskz_loadu_ps(out, tp + t * tap_stride);
      acc = _mm512_add_ps(acc, _mm512_maskz_permutexvar_ps(__mmask16(lanes.mask[size_t(t)]), index, values));
    }
    float* d = dx + p * dx_stride;
    _mm512_mask_storeu_ps(d, in, _mm512_add_ps(_mm512_maskz_loadu_ps(in, d), acc));
  }
}

}  // namespace mdl::cpu::detail

#include "cpu/isa_target_end.h"

#else  // not x86: never called (cpu/small_planes.cpp asks the CPU first)

namespace mdl::cpu::detail {
void unfold_small_planes_u16_avx512(const SmallPlaneGeom&, const uint16_t*, int64_t, int64_t, uint16_t*, int64_t,
                                    int64_t) {}
void fold_small_planes_f32_avx512(const SmallPlaneGeom&, const float*, int64_t, int64_t, int64_t, float*, int64_t) {}
}  // namespace mdl::cpu::detail

#endif
