// The fused ReLU(2x2 / stride 2 max pool) over whole planes on AVX-512: 16 windows a pass, and two
// output rows share a pass when a row has at most 8 windows (SimpleCNN's second pool has 7), so
// short rows do not leave half the lanes idle. A window's winner and its code (2 * row + column)
// follow the scalar loop's visiting order and NaN rule (cpu/pool_relu.cpp); the ReLU then zeroes a
// max <= 0 and blocks its gradient. The backward writes every element of grad_x once: the window's
// gradient at its winner, +0 at the other three places. bf16 rows load each window's column pair
// as one 32-bit word, whose halves are the even and odd values. This file alone is compiled for
// AVX-512F (by pragma).
#include "cpu/pool_relu_rows.h"

#include "kernels/pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstring>
#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"

namespace mdl::cpu::detail {

namespace {

// No std:: templates in this file: one instantiated here would be compiled for AVX-512 and could
// be the copy the linker keeps for the whole program.
int64_t windows_left(int64_t n) { return n < 16 ? n : 16; }
__mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// 16 windows: the winner of row 0's even and odd columns and row 1's (e0, o0, e1, o1), visited in
// that order (a later candidate wins when greater, or when NaN), then rectified: out = the max
// where it is > 0 or NaN, else +0; code = the winner's place, or kPoolReluBlocked.
struct ReluWinner {
  __m512 out;
  __m512i code;
  ReluWinner(__m512 e0, __m512 o0, __m512 e1, __m512 o1) : out(e0), code(_mm512_setzero_si512()) {
    visit(o0, 1);
    visit(e1, 2);
    visit(o1, 3);
    const __mmask16 pass = __mmask16(~_mm512_cmp_ps_mask(out, _mm512_setzero_ps(), _CMP_LE_OQ));
    out = _mm512_maskz_mov_ps(pass, out);
    code = _mm512_mask_mov_epi32(_mm512_set1_epi32(kernels::kPoolReluBlocked), pass, code);
  }
  void visit(__m512 v, int32_t place) {
    const __mmask16 take = _mm512_cmp_ps_mask(v, out, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    out = _mm512_mask_mov_ps(out, take, v);
    code = _mm512_mask_mov_epi32(code, take, _mm512_set1_epi32(place));
  }
  // bf16 windows: a and c hold row 0's and row 1's column pairs as 32-bit words.
  static ReluWinner of_words(__m512i a, __m512i c) {
    const __m512i high = _mm512_set1_epi32(int32_t(0xFFFF0000u));
    return ReluWinner(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)), _mm512_castsi512_ps(_mm512_and_si512(a, high)),
                      _mm512_castsi512_ps(_mm512_slli_epi32(c, 16)), _mm512_castsi512_ps(_mm512_and_si512(c, high)));
  }
  // The winners as bf16 bits in the low halves (each is one of the inputs, or +0).
  __m512i bf16_bits() const { return _mm512_srli_epi32(_mm512_castps_si512(out), 16); }
};

// Lanes 8-15 moved down to lanes 0-7.
__m512 upper_half(__m512 v) { return _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(3, 2, 3, 2)); }
__m512i upper_half(__m512i v) { return _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(3, 2, 3, 2)); }

// Indices that pick the even (odd) elements of the 32 floats a:b.
__m512i even_lanes() { return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30); }
__m512i odd_lanes() { return _mm512_add_epi32(even_lanes(), _mm512_set1_epi32(1)); }

ReluWinner windows(__m512 a0, __m512 a1, __m512 c0, __m512 c1) {
  const __m512i e = even_lanes(), o = odd_lanes();
  return ReluWinner(_mm512_permutex2var_ps(a0, e, a1), _mm512_permutex2var_ps(a0, o, a1),
                    _mm512_permutex2var_ps(c0, e, c1), _mm512_permutex2var_ps(c0, o, c1));
}

void store(const ReluWinner& w, __mmask16 lanes, float* out, uint8_t* codes) {
  _mm512_mask_storeu_ps(out, lanes, w.out);
  _mm512_mask_cvtepi32_storeu_epi8(codes, lanes, w.code);
}
void store(const ReluWinner& w, __mmask16 lanes, uint16_t* out, uint8_t* codes) {
  _mm512_mask_cvtepi32_storeu_epi16(out, lanes, w.bf16_bits());
  _mm512_mask_cvtepi32_storeu_epi8(codes, lanes, w.code);
}
// Lanes 0-7 to the first output row, lanes 8-15 to the next (Wo <= 8 each).
template <class V>
void store_pair(const ReluWinner& w, int64_t Wo, V* out, uint8_t* codes) {
  const __mmask16 lanes = first_lanes(Wo);
  store(w, lanes, out, codes);
  ReluWinner upper = w;
  upper.out = upper_half(w.out);
  upper.code = upper_half(w.code);
  store(upper, lanes, out + Wo, codes + Wo);
}

}  // namespace

void max_pool_2x2_relu_plane_avx512(const float* x, int64_t ldx, int64_t Ho, int64_t Wo, float* out, uint8_t* codes) {
  int64_t oh = 0;
  if (Wo <= 8) {  // rows 2 oh .. 2 oh + 3: lanes 0-7 from the first pair, 8-15 from the second
    const __mmask16 in = first_lanes(2 * Wo);
    for (; oh + 1 < Ho; oh += 2) {
      const float* r = x + 2 * oh * ldx;
      const ReluWinner w = windows(_mm512_maskz_loadu_ps(in, r), _mm512_maskz_loadu_ps(in, r + 2 * ldx),
                                   _mm512_maskz_loadu_ps(in, r + ldx), _mm512_maskz_loadu_ps(in, r + 3 * ldx));
      store_pair(w, Wo, out + oh * Wo, codes + oh * Wo);
    }
  }
  for (; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ow += 16) {
      const int64_t n = windows_left(Wo - ow);  // windows this pass
      const __mmask16 lo = first_lanes(2 * n), hi = n > 8 ? first_lanes(2 * n - 16) : 0;
      const float* a = x + 2 * oh * ldx + 2 * ow;
      const float* c = a + ldx;
      const ReluWinner w = windows(_mm512_maskz_loadu_ps(lo, a), _mm512_maskz_loadu_ps(hi, a + 16),
                                   _mm512_maskz_loadu_ps(lo, c), _mm512_maskz_loadu_ps(hi, c + 16));
      store(w, first_lanes(n), out + oh * Wo + ow, codes + oh * Wo + ow);
    }
}

void max_pool_2x2_relu_plane_avx512(const uint16_t* x, int64_t ldx, int64_t Ho, int64_t Wo, uint16_t* out,
                                    uint8_t* codes) {
  int64_t oh = 0;
  if (Wo <= 8) {  // the second output row's words in the upper 8 lanes
    const __mmask16 in = first_lanes(Wo);
    auto words = [&](const uint16_t* r0, const uint16_t* r1) {
      return _mm512_inserti64x4(_mm512_maskz_loadu_epi32(in, r0),
                                _mm512_castsi512_si256(_mm512_maskz_loadu_epi32(in, r1)), 1);
    };
    for (; oh + 1 < Ho; oh += 2) {
      const uint16_t* r = x + 2 * oh * ldx;
      const ReluWinner w = ReluWinner::of_words(words(r, r + 2 * ldx), words(r + ldx, r + 3 * ldx));
      store_pair(w, Wo, out + oh * Wo, codes + oh * Wo);
    }
  }
  for (; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ow += 16) {
      const __mmask16 lanes = first_lanes(Wo - ow);
      const uint16_t* a = x + 2 * oh * ldx + 2 * ow;
      const ReluWinner w = ReluWinner::of_words(_mm512_maskz_loadu_epi32(lanes, a),
                                                _mm512_maskz_loadu_epi32(lanes, a + ldx));
      store(w, lanes, out + oh * Wo + ow, codes + oh * Wo + ow);
    }
}

namespace {

// n <= 16 codes widened to 32-bit lanes (lanes past n hold garbage or 0); `left` codes remain in
// the plane from `codes` on, so 16 can be read directly when left >= 16 (AVX-512F has no masked
// byte load), else they go through a buffer.
__m512i load_codes(const uint8_t* codes, int64_t n, int64_t left) {
  if (left >= 16) return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
  alignas(16) uint8_t buf[16] = {};
  std::memcpy(buf, codes, size_t(n));
  return _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(buf)));
}

// The four places' gradients of 16 windows: g at the place the code names, +0 at the others.
struct Routed {
  __m512i place[4];
  Routed(__m512i g, __m512i codes) {
    for (int k = 0; k < 4; ++k)
      place[k] = _mm512_maskz_mov_epi32(_mm512_cmpeq_epi32_mask(codes, _mm512_set1_epi32(k)), g);
  }
};

}  // namespace

void max_pool_2x2_relu_backward_plane_avx512(const float* grad_out, const uint8_t* codes, int64_t H, int64_t W,
                                             int64_t Ho, int64_t Wo, float* grad_x) {
  const __m512 zero = _mm512_setzero_ps();  // g + 0 turns -0 into +0, as the sum into a zeroed plane gives it
  int64_t oh = 0;
  if (Wo <= 8) {  // two window rows a pass: lanes 0..Wo-1 row oh, lanes Wo..2Wo-1 row oh + 1
    // Input row 2 oh + k takes, at position p, lane (k / 2) * Wo + p / 2 of place 2 (k % 2) + p % 2.
    alignas(64) int32_t upper[16], lower[16];
    for (int32_t p = 0; p < 16; ++p) {
      upper[p] = p / 2 + (p % 2 ? 16 : 0);
      lower[p] = upper[p] + int32_t(Wo);
    }
    const __m512i up = _mm512_load_si512(upper), down = _mm512_load_si512(lower);
    const __mmask16 lanes = first_lanes(2 * Wo);
    for (; oh + 1 < Ho; oh += 2) {
      const int64_t at = oh * Wo;
      const __m512 g = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, grad_out + at), zero);
      const Routed r(_mm512_castps_si512(g), load_codes(codes + at, 2 * Wo, Ho * Wo - at));
      float* d = grad_x + 2 * oh * W;
      _mm512_mask_storeu_epi32(d, lanes, _mm512_permutex2var_epi32(r.place[0], up, r.place[1]));
      _mm512_mask_storeu_epi32(d + W, lanes, _mm512_permutex2var_epi32(r.place[2], up, r.place[3]));
      _mm512_mask_storeu_epi32(d + 2 * W, lanes, _mm512_permutex2var_epi32(r.place[0], down, r.place[1]));
      _mm512_mask_storeu_epi32(d + 3 * W, lanes, _mm512_permutex2var_epi32(r.place[2], down, r.place[3]));
      if (W % 2) d[W - 1] = d[2 * W - 1] = d[3 * W - 1] = d[4 * W - 1] = 0.0f;
    }
  }
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  for (; oh < Ho; ++oh) {
    float* d0 = grad_x + 2 * oh * W;
    float* d1 = d0 + W;
    for (int64_t ow = 0; ow < Wo; ow += 16) {
      const int64_t n = windows_left(Wo - ow), at = oh * Wo + ow;
      const __mmask16 first = first_lanes(2 * n), second = n > 8 ? first_lanes(2 * n - 16) : 0;
      const __m512 g = _mm512_add_ps(_mm512_maskz_loadu_ps(first_lanes(n), grad_out + at), zero);
      const Routed r(_mm512_castps_si512(g), load_codes(codes + at, n, Ho * Wo - at));
      float* rows[2] = {d0 + 2 * ow, d1 + 2 * ow};
      for (int row = 0; row < 2; ++row) {  // interleave the row's even and odd places
        const __m512i even = r.place[2 * row], odd = r.place[2 * row + 1];
        _mm512_mask_storeu_epi32(rows[row], first, _mm512_permutex2var_epi32(even, lo, odd));
        if (second) _mm512_mask_storeu_epi32(rows[row] + 16, second, _mm512_permutex2var_epi32(even, hi, odd));
      }
    }
    if (W % 2) d0[W - 1] = d1[W - 1] = 0.0f;
  }
  if (H % 2) std::memset(grad_x + (H - 1) * W, 0, size_t(W) * sizeof(float));  // +0
}

void max_pool_2x2_relu_backward_plane_avx512(const uint16_t* grad_out, const uint8_t* codes, int64_t H, int64_t W,
                                             int64_t Ho, int64_t Wo, uint16_t* grad_x) {
  // n <= 16 gradients from `at` (`left` remain in the plane) as bf16 bits in 32-bit lanes, through
  // float and + 0, as the float sum into a zeroed plane rounds them: -0 becomes +0.
  auto load_grads = [&](int64_t at, int64_t n, int64_t left) {
    alignas(32) uint16_t buf[16] = {};
    if (left < 16) std::memcpy(buf, grad_out + at, size_t(n) * sizeof(uint16_t));
    const __m256i* g16 = reinterpret_cast<const __m256i*>(left < 16 ? buf : grad_out + at);
    const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(g16));
    const __m512 g = _mm512_add_ps(_mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)), _mm512_setzero_ps());
    return _mm512_srli_epi32(_mm512_castps_si512(g), 16);
  };
  // Word j of an input row: window j's even place in its low half, its odd place in the high half.
  auto row_words = [](const Routed& r, int row) {
    return _mm512_or_si512(r.place[2 * row], _mm512_slli_epi32(r.place[2 * row + 1], 16));
  };
  int64_t oh = 0;
  if (Wo <= 8) {  // two window rows a pass: lanes 0..Wo-1 row oh, lanes Wo..2Wo-1 row oh + 1
    const __m512i down = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(int32_t(Wo)));
    const __mmask16 lanes = first_lanes(Wo);
    for (; oh + 1 < Ho; oh += 2) {
      const int64_t at = oh * Wo, left = Ho * Wo - at;
      const Routed r(load_grads(at, 2 * Wo, left), load_codes(codes + at, 2 * Wo, left));
      uint16_t* d = grad_x + 2 * oh * W;
      for (int row = 0; row < 2; ++row) {
        const __m512i words = row_words(r, row);
        _mm512_mask_storeu_epi32(d + row * W, lanes, words);
        _mm512_mask_storeu_epi32(d + (2 + row) * W, lanes, _mm512_permutexvar_epi32(down, words));
      }
      if (W % 2) d[W - 1] = d[2 * W - 1] = d[3 * W - 1] = d[4 * W - 1] = 0;
    }
  }
  for (; oh < Ho; ++oh) {
    uint16_t* d0 = grad_x + 2 * oh * W;
    for (int64_t ow = 0; ow < Wo; ow += 16) {
      const int64_t n = windows_left(Wo - ow), at = oh * Wo + ow, left = Ho * Wo - at;
      const Routed r(load_grads(at, n, left), load_codes(codes + at, n, left));
      for (int row = 0; row < 2; ++row)
        _mm512_mask_storeu_epi32(d0 + row * W + 2 * ow, first_lanes(n), row_words(r, row));
    }
    if (W % 2) d0[W - 1] = d0[2 * W - 1] = 0;
  }
  if (H % 2) std::memset(grad_x + (H - 1) * W, 0, size_t(W) * sizeof(uint16_t));
}

}  // namespace mdl::cpu::detail

#include "cpu/isa_target_end.h"

#else
#include <cstdlib>
namespace mdl::cpu::detail {
void max_pool_2x2_relu_plane_avx512(const float*, int64_t, int64_t, int64_t, float*, uint8_t*) {
  std::abort();  // never chosen here
}
void max_pool_2x2_relu_plane_avx512(const uint16_t*, int64_t, int64_t, int64_t, uint16_t*, uint8_t*) { std::abort(); }
void max_pool_2x2_relu_backward_plane_avx512(const float*, const uint8_t*, int64_t, int64_t, int64_t, int64_t, float*) {
  std::abort();
}
void max_pool_2x2_relu_backward_plane_avx512(const uint16_t*, const uint8_t*, int64_t, int64_t, int64_t, int64_t,
                                             uint16_t*) {
  std::abort();
}
}  // namespace mdl::cpu::detail
#endif
