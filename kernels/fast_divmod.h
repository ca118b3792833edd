// Division by a number fixed before a kernel starts, with a multiply and a shift instead of a divide
// instruction (Granlund and Montgomery's magic numbers): the GPU's strided kernels turn an element's
// index into one coordinate per dimension this way, where a 64-bit division per dimension costs
// tens of instructions. Written once for the kernels (cuda/common.cuh's Geo) and the CPU test that
// checks it against / and %.
// For a divisor d in [1, 2^31): shift = ceil(log2 d), multiplier = floor(2^32 (2^shift - d) / d) + 1;
// then n / d = (umulhi(n, multiplier) + n) >> shift for every n in [0, 2^31), the sum fitting 32 bits.
#pragma once
#include <cstdint>

#include "kernels/host_device.h"

namespace mdl {

inline constexpr uint32_t kFastDivmodLimit = 0x7fffffffu;  // the largest divisor and numerator

struct FastDivmod {
  uint32_t divisor = 1, multiplier = 1, shift = 0;

  FastDivmod() = default;
  // d in [1, kFastDivmodLimit]; the caller checks (Geo uses 64-bit division past it).
  explicit FastDivmod(uint32_t d) : divisor(d) {
    while (shift < 31 && (uint32_t(1) << shift) < d) ++shift;
    multiplier = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }

  // n in [0, kFastDivmodLimit].
  MDL_HOST_DEVICE uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(n, multiplier);
#else
    const uint32_t hi = uint32_t((uint64_t(n) * multiplier) >> 32);
#endif
    return (hi + n) >> shift;
  }
  MDL_HOST_DEVICE uint32_t mod(uint32_t n, uint32_t quotient) const { return n - quotient * divisor; }
};

}  // namespace mdl
