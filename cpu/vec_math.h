// e^x, tanh, sigmoid, erf and GELU (exact and tanh form) on any GCC float vector V (4 floats on SSE2, 8 on
// AVX2, 16 on AVX-512F): Cephes polynomials, 1-2 ulp. Written on vectors because the auto-vectoriser will not
// if-convert their selects. Always inlined, so each instantiation is compiled for the caller's
// target (vec_map_avx2.cpp instantiates them for 8 floats).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace mdl::cpu::vecmath {

#define MDL_VEC_INLINE [[gnu::always_inline]] inline

// e^x over the whole float range: 2^n * e^r with n = round(x / ln2) and a degree-6 polynomial for
// e^r, |r| <= ln2/2. 2^n is applied as two factors, so results below the smallest normal float
// come out subnormal and those above the largest come out +inf; NaN stays NaN. On 16 floats one
// VSCALEFPS applies it: the same single rounding, so the same bits, in one instruction for nine.
template <class V>
MDL_VEC_INLINE V exp_v(V x) {
  using I = decltype(x < x);           // the int32 vector of V's width
  const V magic = V{} + 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer
  V xc = x > 89.0f ? V{} + 89.0f : x;  // e^89 overflows, e^-104 rounds to 0
  xc = xc < -104.0f ? V{} - 104.0f : xc;
  const V t = xc * 1.44269504088896341f + magic;
  const V n = t - magic;
  V r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V y = V{} + 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (sizeof(V) == sizeof(__m512)) return (V)_mm512_scalef_ps((__m512)y, (__m512)n);
#endif
  const I ni = (I)t - (I)magic;  // the bits of t hold n; in [-150, 129]
  const I n1 = ni >> 1, n2 = ni - n1;
  return y * (V)((n1 + 127) << 23) * (V)((n2 + 127) << 23);
}

// tanh(x): an odd polynomial below |x| = 0.625, where 1 - 2 / (e^2|x| + 1) would cancel; that
// formula above it, with x's sign bit. tanh(+-inf) = +-1, tanh(-0) = -0, NaN stays NaN.
template <class V>
MDL_VEC_INLINE V tanh_v(V x) {
  const V z = x * x;
  V p = V{} - 5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  using I = decltype(x < x);
  const V small = p * z * x + x;  // x's sign, but +0 for -0
  const V ax = x < 0.0f ? -x : x;
  const V big = 1.0f - 2.0f / (exp_v(ax + ax) + 1.0f);
  const V magnitude = ax < 0.625f ? small : big;
  return (V)((I)magnitude | ((I)x & (I{} + (-2147483647 - 1))));  // x's sign bit on: tanh(-0) = -0
}

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that tiny results keep their precision.
template <class V>
MDL_VEC_INLINE V sigmoid_v(V x) {
  const V e = exp_v(x < 0.0f ? x : -x);  // e^-|x|
  const V r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

constexpr float kSqrt2OverPi = 0.79788456080286535588f, kGeluCubic = 0.044715f;

// GELU with the tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class V>
MDL_VEC_INLINE V gelu_tanh_v(V x) {
  return 0.5f * x * (1.0f + tanh_v(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

// Its derivative: (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t the tanh above.
template <class V>
MDL_VEC_INLINE V gelu_tanh_grad_v(V x) {
  const V t = tanh_v(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3 * kGeluCubic * x * x);
}

// erf(x): below |x| = 0.5 its Taylor series to x^11 (relative error under 1e-8, so tiny x keep their
// ulps); above, 1 - (a1 t + ... + a5 t^5) e^(-x^2) with t = 1 / (1 + p |x|) (Abramowitz and Stegun
// 7.1.26, absolute error under 1.5e-7, the form PyTorch's vectorised CPU erf takes). Odd in x.
// erf_given(x, e) takes e = e^(-x^2) from the caller, who may need it too (GELU's derivative).
template <class V>
MDL_VEC_INLINE V erf_given(V x, V e) {
  const V ax = x < 0.0f ? -x : x;
  const V z = x * x;
  const V taylor = x * 1.12837916709551257f *
                   (1.0f +
                    z * (-0.333333333333f +
                         z * (0.1f + z * (-0.0238095238095f + z * (0.00462962962963f + z * -0.000757575757576f)))));
  const V t = 1.0f / (1.0f + 0.3275911f * ax);
  const V y = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
  const V r = 1.0f - y * e;
  return ax < 0.5f ? taylor : x < 0.0f ? -r : r;
}
template <class V>
MDL_VEC_INLINE V erf_v(V x) {
  return erf_given(x, exp_v(-(x * x)));
}

constexpr float kSqrtHalf = 0.70710678118654752440f, kInvSqrt2Pi = 0.39894228040143267794f;

// GELU, exact: x Phi(x) = x/2 (1 + erf(x / sqrt 2)).
template <class V>
MDL_VEC_INLINE V gelu_v(V x) {
  return 0.5f * x * (1.0f + erf_v(x * kSqrtHalf));
}

// Its derivative: Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi). With u = x / sqrt 2, erf(u)
// needs e^(-u^2), the same exponential as phi: one exp_v serves both.
template <class V>
MDL_VEC_INLINE V gelu_grad_v(V x) {
  const V u = x * kSqrtHalf, e = exp_v(-(u * u));
  return 0.5f * (1.0f + erf_given(u, e)) + x * kInvSqrt2Pi * e;
}

#undef MDL_VEC_INLINE

}  // namespace mdl::cpu::vecmath
