// Four-float vectors (GCC/Clang vector extensions: SSE2 on baseline x86-64) and a vectorised
// e^x (Cephes expf, ~1 ulp), shared by the softmax and cross-entropy kernels. The auto-vectoriser
// will not if-convert the selects in exp, so they are written on vectors directly.
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

// e^x for x <= ~88 (callers feed it x - max <= 0): 2^n * e^r with n = round(x / ln2), a degree-6
// polynomial for e^r, |r| <= ln2/2 (Cephes expf, ~1 ulp); 0 below the smallest normal float;
// NaN stays NaN.
inline f4 exp4(f4 x) {
  const f4 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const f4 xc = x > splat(88.3762626647949f) ? splat(88.3762626647949f) : x;
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
  const i4 e = ((i4)t - (i4)magic + 127) << 23;
  return x < splat(-87.3365447505531f) ? splat(0.0f) : y * (f4)e;
}
}  // namespace mdl::cpu::vec4
