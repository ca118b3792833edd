// copy_block_u16, add_block_f32 and fold_plane_f32 on AVX-512: a vector of 32 16-bit values or 16
// floats a pass, the row's end masked, so a row of up to one vector is one load (two to add) and one
// store. This
// file alone is compiled for AVX-512F and BW (by pragma).
#include "cpu/block_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MDL_ISA_TARGET "avx512f,avx512bw"
#include "cpu/isa_target_begin.h"

namespace mdl::cpu::detail {

void copy_block_u16_avx512(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride, int64_t rows,
                           int64_t n) {
  const int64_t whole = n / 32 * 32;
  const __mmask32 tail = __mmask32((uint64_t(1) << (n - whole)) - 1);
  for (int64_t r = 0; r < rows; ++r, dst += dst_stride, src += src_stride) {
    for (int64_t j = 0; j < whole; j += 32) _mm512_storeu_si512(dst + j, _mm512_loadu_si512(src + j));
    if (tail) _mm512_mask_storeu_epi16(dst + whole, tail, _mm512_maskz_loadu_epi16(tail, src + whole));
  }
}

void add_block_f32_avx512(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows,
                          int64_t n) {
  const int64_t whole = n / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (n - whole)) - 1);
  for (int64_t r = 0; r < rows; ++r, dst += dst_stride, src += src_stride) {
    for (int64_t j = 0; j < whole; j += 16)
      _mm512_storeu_ps(dst + j, _mm512_add_ps(_mm512_loadu_ps(dst + j), _mm512_loadu_ps(src + j)));
    if (tail)
      _mm512_mask_storeu_ps(
          dst + whole, tail,
          _mm512_add_ps(_mm512_maskz_loadu_ps(tail, dst + whole), _mm512_maskz_loadu_ps(tail, src + whole)));
  }
}

// Output row ih in 16-float pieces: lane iw of tap (ki, kj) reads the tap's row oh = ih + pad_h - ki at
// column iw + pad_w - kj, a masked load from before the row's start where kj > pad_w (masked-off lanes
// are not read, so they cannot fault).
void fold_plane_f32_avx512(float* dx, int64_t H, int64_t W, const float* taps, int64_t tap_stride, int64_t kh,
                           int64_t kw, int64_t Ho, int64_t Wo, int64_t pad_h, int64_t pad_w) {
  for (int64_t ih = 0; ih < H; ++ih)
    for (int64_t w0 = 0; w0 < W; w0 += 16) {
      const int64_t n = W - w0 < 16 ? W - w0 : 16;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t oh = ih + pad_h - ki;
        if (oh < 0 || oh >= Ho) continue;
        for (int64_t kj = 0; kj < kw; ++kj) {
          // lanes l with 0 <= w0 + l + pad_w - kj < Wo, l < n
          const int64_t lo = kj - pad_w - w0 > 0 ? kj - pad_w - w0 : 0;
          int64_t hi = Wo + kj - pad_w - w0;
          hi = hi < n ? hi : n;
          if (hi <= lo) continue;
          const __mmask16 m = __mmask16(((1u << (hi - lo)) - 1) << lo);
          const float* row = taps + (ki * kw + kj) * tap_stride + oh * Wo + w0 + pad_w - kj;
          acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, row));
        }
      }
      const __mmask16 all = __mmask16((1u << n) - 1);
      float* d = dx + ih * W + w0;
      _mm512_mask_storeu_ps(d, all, _mm512_add_ps(_mm512_maskz_loadu_ps(all, d), acc));
    }
}

}  // namespace mdl::cpu::detail

#include "cpu/isa_target_end.h"

#else  // not x86: never called (cpu/block_rows.cpp asks the CPU first)

namespace mdl::cpu::detail {
void copy_block_u16_avx512(uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, int64_t) {}
void add_block_f32_avx512(float*, int64_t, const float*, int64_t, int64_t, int64_t) {}
void fold_plane_f32_avx512(float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t) {}
}  // namespace mdl::cpu::detail

#endif
