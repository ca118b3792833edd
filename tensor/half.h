// f16 (IEEE binary16) and bf16 (bfloat16) storage types that convert like hardware:
// round-to-nearest-even, infinities, NaN and subnormals exact, so f16 overflow and
// underflow on the CPU happen exactly as on a GPU. Arithmetic converts to float.
#pragma once
#include <cstdint>
#include <cstring>

namespace mdl {

namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f32 -> f16 bits, round to nearest even. NaN stays NaN (quiet, payload truncated).
inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    if (abs == 0x7f800000u) return uint16_t(sign | 0x7c00u);
    return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                                  // below 2^-14: f16 subnormal (or zero)
    // Add 0.5 (as a float) so that the FPU's own RNE does the rounding at 2^-24 granularity.
    float r = bits_float(abs) + 0.5f;
    return uint16_t(sign | (float_bits(r) - 0x3f000000u));
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return uint16_t(sign | (abs >> 13));
}

inline float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  // Infinity, or NaN made quiet (payload kept) as F16C's vcvtph2ps does.
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = float(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// f32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN. A select, not a branch, so
// loops over it vectorise.
inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (x >> 16) | 0x40u;
  return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
inline float bf16_bits_to_f32(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// double -> float rounding to odd: rounding that result to f16/bf16 then equals rounding the
// double directly (no double-rounding error), as a GPU's __double2half does.
inline float f64_to_f32_round_odd(double d) {
  float f = float(d);
  if (double(f) == d || f != f) return f;
  uint32_t u = float_bits(f);
  if ((double(f) > d) == (d > 0)) --u;  // rounded away from zero: step back toward zero
  return bits_float(u | 1u);
}
}  // namespace detail

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(detail::f32_to_f16_bits(f)) {}  // NOLINT: implicit like CUDA's __half
  explicit Half(double d) : bits(detail::f32_to_f16_bits(detail::f64_to_f32_round_odd(d))) {}
  operator float() const { return detail::f16_bits_to_f32(bits); }
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(detail::f32_to_bf16_bits(f)) {}  // NOLINT
  explicit BFloat16(double d) : bits(detail::f32_to_bf16_bits(detail::f64_to_f32_round_odd(d))) {}
  operator float() const { return detail::bf16_bits_to_f32(bits); }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

// Bulk conversions: F16C instructions when the CPU has them, the scalar path otherwise.
void f32_to_f16(const float* src, Half* dst, int64_t n);
void f16_to_f32(const Half* src, float* dst, int64_t n);
void f32_to_bf16(const float* src, BFloat16* dst, int64_t n);
void bf16_to_f32(const BFloat16* src, float* dst, int64_t n);
// The same, overloaded on the 16-bit type, for templates.
inline void to_f32(const Half* src, float* dst, int64_t n) { f16_to_f32(src, dst, n); }
inline void to_f32(const BFloat16* src, float* dst, int64_t n) { bf16_to_f32(src, dst, n); }
inline void from_f32(const float* src, Half* dst, int64_t n) { f32_to_f16(src, dst, n); }
inline void from_f32(const float* src, BFloat16* dst, int64_t n) { f32_to_bf16(src, dst, n); }
bool cpu_has_f16c();

}  // namespace mdl
