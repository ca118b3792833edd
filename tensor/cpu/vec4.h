// Four-float vectors (GCC/Clang vector extensions: SSE2 on baseline x86-64) and the vectorised
// e^x, tanh and sigmoid (Cephes, 1-2 ulp) that softmax, cross-entropy and the unary activations
// share. The auto-vectoriser will not if-convert their selects, so they are written on vectors.
#pragma once
#include <cstdint>
#include <cstring>

namespace mdl::cpu::vec4 {

using f4 = float __attribute__((vector_size(16)));
using i4 = int32_t __attribute__((vector_size(16)));

inline f4 load4(const float* p) {
  f4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, f4 v) { std::memcpy(p, &v, sizeof v); }
inline f4 splat(float x) { return f4{x, x, x, x}; }
inline double hsum(f4 v) { return (double(v[0]) + double(v[1])) + (double(v[2]) + double(v[3])); }

// e^x over the whole float range: 2^n * e^r with n = round(x / ln2) and a degree-6 polynomial for
// e^r, |r| <= ln2/2 (Cephes expf, ~1 ulp). 2^n is applied as two factors, so results below the
// smallest normal float come out subnormal and those above the largest come out +inf; NaN stays NaN.
inline f4 exp4(f4 x) {
  const f4 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  f4 xc = x > splat(89.0f) ? splat(89.0f) : x;  // e^89 overflows, e^-104 rounds to 0
  xc = xc < splat(-104.0f) ? splat(-104.0f) : xc;
  const f4 t = xc * 1.44269504088896341f + magic;
  const f4 n = t - magic;
  f4 r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  f4 y = splat(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  const i4 ni = (i4)t - (i4)magic;  // in [-150, 129]
  const i4 n1 = ni >> 1, n2 = ni - n1;
  return y * (f4)((n1 + 127) << 23) * (f4)((n2 + 127) << 23);
}

// tanh(x): an odd polynomial below |x| = 0.625 (Cephes tanhf, ~2 ulp), where 1 - 2 / (e^2|x| + 1)
// would cancel; that formula above it, with x's sign. tanh(+-inf) = +-1, NaN stays NaN.
inline f4 tanh4(f4 x) {
  const f4 z = x * x;
  f4 p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const f4 small = p * z * x + x;
  const f4 ax = x < 0.0f ? -x : x;
  const f4 big = 1.0f - 2.0f / (exp4(ax + ax) + 1.0f);
  const f4 signed_big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : signed_big;
}

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, so that tiny results keep their precision.
inline f4 sigmoid4(f4 x) {
  const f4 e = exp4(x < 0.0f ? x : -x);  // e^-|x|
  const f4 r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}
// GELU with the tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline f4 gelu_tanh4(f4 x) { return 0.5f * x * (1.0f + tanh4(0.79788456080286535588f * (x + 0.044715f * x * x * x))); }

// o[i] = f(x[i]) over n floats (o may be x), 4 at a time; a short tail runs on a zero-padded
// vector, so an element's result does not depend on where it sits.
template <class F>
inline void map4(float* o, const float* x, int64_t n, const F& f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store4(o + i, f(load4(x + i)));
  if (i < n) {
    float tail[4] = {0, 0, 0, 0};
    std::memcpy(tail, x + i, size_t(n - i) * sizeof(float));
    store4(tail, f(load4(tail)));
    std::memcpy(o + i, tail, size_t(n - i) * sizeof(float));
  }
}

}  // namespace mdl::cpu::vec4
