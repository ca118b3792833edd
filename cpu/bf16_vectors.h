// bf16 values on GCC float vectors (float __attribute__((vector_size(...)))) for loop bodies written
// once on a vector type V (cpu/bf16_batch_norm_rows_impl.h, cpu/bf16_binary_impl.h): a bf16 value is a
// float's top half, so widening is a shift and rounding back a few integer operations, in the
// registers. Included inside each instantiating file's target region; internal linkage and always
// inlined, so every copy compiles for its caller's target.
#pragma once
#include <cstdint>
#include <cstring>

#include "cpu/float_vectors.h"

namespace mdl::cpu::bf16_vectors {

namespace {

using float_vectors::kWidth;

// V's lanes as 32-bit unsigned integers, and as 16-bit ones (bf16 bits).
template <int W>
struct Lanes;
template <>
struct Lanes<4> {
  using U = uint32_t __attribute__((vector_size(16)));
  using H = uint16_t __attribute__((vector_size(8)));
};
template <>
struct Lanes<8> {
  using U = uint32_t __attribute__((vector_size(32)));
  using H = uint16_t __attribute__((vector_size(16)));
  using Half = float __attribute__((vector_size(16)));  // V's low or high half
};
template <>
struct Lanes<16> {
  using U = uint32_t __attribute__((vector_size(64)));
  using H = uint16_t __attribute__((vector_size(32)));
  using Half = float __attribute__((vector_size(32)));
};

template <class V>
[[gnu::always_inline]] inline V load_bf16(const uint16_t* p) {
  using L = Lanes<kWidth<V>>;
  typename L::H h;
  std::memcpy(&h, p, sizeof h);
  return (V)(__builtin_convertvector(h, typename L::U) << 16);
}
[[gnu::always_inline]] inline float load_bf16_1(const uint16_t* p) {
  const uint32_t u = uint32_t(*p) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// v rounded to bf16 as tensor/half.h's f32_to_bf16_bits rounds a float: nearest even, a NaN quiet.
template <class V>
[[gnu::always_inline]] inline void store_bf16(uint16_t* p, V v) {
  using L = Lanes<kWidth<V>>;
  using U = typename L::U;
  const U u = (U)v;
  const U rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet_nan = (u >> 16) | 0x40u;
  const U bits = (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  const typename L::H h = __builtin_convertvector(bits, typename L::H);
  std::memcpy(p, &h, sizeof h);
}
[[gnu::always_inline]] inline void store_bf16_1(uint16_t* p, float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet_nan = (u >> 16) | 0x40u;
  *p = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace

}  // namespace mdl::cpu::bf16_vectors
