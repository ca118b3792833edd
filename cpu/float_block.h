// Blocks of floats for kernels on 16-bit types: load up to kFloatBlock elements of any floating
// dtype (at a byte stride) into a float buffer, compute there, and store back with one rounding.
// Contiguous f16 converts 8 lanes at a time by F16C and bf16 by vectorised shifts; a strided run
// gathers its bits first. The per-element conversions of half.h give the same bits, and are what
// toggles::set_bulk_half_conversion(false) falls back to, for benchmarks and cross-checks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/half.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

inline constexpr int64_t kFloatBlock = 256;


// dst[i] = float(element i of the run at p, stride bytes apart), n <= kFloatBlock. Stride 0
// repeats one element.
template <class T>
void load_floats(const char* p, int64_t stride, float* dst, int64_t n) {
  if (stride == 0) {
    const float v = float(*reinterpret_cast<const T*>(p));
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
    return;
  }
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    if (toggles::bulk_half_conversion()) {
      if (stride == int64_t(sizeof(T))) return to_f32(reinterpret_cast<const T*>(p), dst, n);
      T bits[kFloatBlock];
      for (int64_t i = 0; i < n; ++i) bits[i] = *reinterpret_cast<const T*>(p + i * stride);
      return to_f32(bits, dst, n);
    }
  }
  if (stride == int64_t(sizeof(T)) && std::is_same_v<T, float>)
    return (void)std::memcpy(dst, p, size_t(n) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) dst[i] = float(*reinterpret_cast<const T*>(p + i * stride));
}

// Element i of the run at p (stride bytes apart) = T(src[i]), rounded once, n <= kFloatBlock.
template <class T>
void store_floats(char* p, int64_t stride, const float* src, int64_t n) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    if (toggles::bulk_half_conversion()) {
      if (stride == int64_t(sizeof(T))) return from_f32(src, reinterpret_cast<T*>(p), n);
      T bits[kFloatBlock];
      from_f32(src, bits, n);
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p + i * stride) = bits[i];
      return;
    }
  }
  if (stride == int64_t(sizeof(T)) && std::is_same_v<T, float>)
    return (void)std::memcpy(p, src, size_t(n) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p + i * stride) = T(src[i]);
}

// n contiguous elements, any n: dst = T(src), rounded once.
template <class T>
void from_floats(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += kFloatBlock)
    store_floats<T>(reinterpret_cast<char*>(dst + i), sizeof(T), src + i, std::min(kFloatBlock, n - i));
}

}  // namespace mdl::cpu
