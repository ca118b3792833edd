// Value conversion between element types on the host, as the CPU's copy and cast kernels do it:
// floats to integers saturate (NaN gives 0) instead of invoking undefined behaviour; anything to
// bool is "!= 0"; doubles reach f16/bf16 with a single rounding. CUDA rounds host scalars through
// it too (convert_host in cuda/common.cuh); its device-side convert follows the same rules.
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/dtype.h"

namespace mdl::cpu {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class To, class From>
inline To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<acc_t<From>>(x) != acc_t<From>(0);
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) return To(x);
    else if constexpr (std::is_same_v<From, int64_t> || std::is_same_v<From, int32_t>) return To(double(x));
    else return To(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    double v = double(static_cast<acc_t<From>>(x));
    if (v != v) return To(0);
    if (v <= double(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= double(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(static_cast<acc_t<From>>(x));
  }
}

}  // namespace mdl::cpu
