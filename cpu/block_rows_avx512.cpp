// copy_block_u16(_even), add_block_f32 and fold_plane_f32 on AVX-512: a vector of 32 16-bit values
// or 16 floats a pass, the row's end masked, so a row of up to one vector is one load (two to add,
// two to pick every other value) and one store. This file alone is compiled for AVX-512F and BW (by
// pragma).
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

// 32 outputs a pass: the even lanes of 64 source values, picked from two loads by one permute.
void copy_block_u16_even_avx512(uint16_t* dst, int64_t dst_stride, const uint16_t* src, int64_t src_stride,
                                int64_t rows, int64_t n) {
  alignas(64) uint16_t even[32];
  for (int i = 0; i < 32; ++i) even[i] = uint16_t(2 * i);
  const __m512i pick = _mm512_load_si512(even);
  for (int64_t r = 0; r < rows; ++r, dst += dst_stride, src += src_stride)
    for (int64_t j = 0; j < n; j += 32) {
      const int64_t m = n - j < 32 ? n - j : 32;  // outputs this pass, from source values 0 .. 2m - 2
      const int64_t reads = 2 * m - 1;
      const __mmask32 lo = __mmask32(reads >= 32 ? 0xffffffffu : (1u << reads) - 1);
      const __mmask32 hi = __mmask32(reads > 32 ? (1u << (reads - 32)) - 1 : 0u);
      const __m512i a = _mm512_maskz_loadu_epi16(lo, src + 2 * j), b = _mm512_maskz_loadu_epi16(hi, src + 2 * j + 32);
      const __mmask32 out = __mmask32(m == 32 ? 0xffffffffu : (uint32_t(1) << m) - 1);
      _mm512_mask_storeu_epi16(dst + j, out, _mm512_permutex2var_epi16(a, pick, b));
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

// Output row ih in 16-float pieces. At stride_w 1, lane iw of tap (ki, kj) reads the tap's row oh at
// column iw + pad_w - kj: a masked load from before the row's start where kj > pad_w (masked-off
// lanes are not read, so they cannot fault). At stride_w 2, every other lane reads one: the lanes
// l0, l0 + 2, ... whose iw + pad_w - kj is even read consecutive columns t0, t0 + 1, ..., loaded
// as 8 floats and spread to those lanes by an expand.
void fold_plane_f32_avx512(float* dx, int64_t H, int64_t W, const float* taps, int64_t tap_stride, int64_t kh,
                           int64_t kw, int64_t Ho, int64_t Wo, int64_t pad_h, int64_t pad_w, int64_t stride_h,
                           int64_t stride_w) {
  for (int64_t ih = 0; ih < H; ++ih)
    for (int64_t w0 = 0; w0 < W; w0 += 16) {
      const int64_t n = W - w0 < 16 ? W - w0 : 16;
      __m512 acc = _mm512_setzero_ps();
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t rh = ih + pad_h - ki;  // oh * stride_h
        if (rh < 0 || rh % stride_h != 0 || rh / stride_h >= Ho) continue;
        const float* tap_row = taps + ki * kw * tap_stride + rh / stride_h * Wo;
        for (int64_t kj = 0; kj < kw; ++kj) {
          const float* row = tap_row + kj * tap_stride;
          if (stride_w == 1) {
            // lanes l with 0 <= w0 + l + pad_w - kj < Wo, l < n
            const int64_t lo = kj - pad_w - w0 > 0 ? kj - pad_w - w0 : 0;
            int64_t hi = Wo + kj - pad_w - w0;
            hi = hi < n ? hi : n;
            if (hi <= lo) continue;
            const __mmask16 m = __mmask16(((1u << (hi - lo)) - 1) << lo);
            acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, row + w0 + pad_w - kj));
            continue;
          }
          const int64_t first = w0 + pad_w - kj, l0 = first & 1, t0 = (first + l0) / 2;
          // values i < 8 go to lanes l0 + 2i: those with l0 + 2i < n and 0 <= t0 + i < Wo
          const int64_t lo = t0 < 0 ? -t0 : 0;
          int64_t hi = Wo - t0 < 8 ? Wo - t0 : 8;
          hi = hi < (n - l0 + 1) / 2 ? hi : (n - l0 + 1) / 2;
          if (hi <= lo) continue;
          const __mmask16 m = __mmask16(((1u << (hi - lo)) - 1) << lo);
          acc = _mm512_add_ps(
              acc, _mm512_maskz_expand_ps(__mmask16(l0 ? 0xAAAA : 0x5555), _mm512_maskz_loadu_ps(m, row + t0)));
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
void copy_block_u16_even_avx512(uint16_t*, int64_t, const uint16_t*, int64_t, int64_t, int64_t) {}
void add_block_f32_avx512(float*, int64_t, const float*, int64_t, int64_t, int64_t) {}
void fold_plane_f32_avx512(float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t) {}
}  // namespace mdl::cpu::detail

#endif
