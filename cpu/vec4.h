// Four-float vectors (GCC/Clang vector extensions: SSE2 on baseline x86-64) and vec_math.h's e^x
// on them, as the softmax and cross-entropy kernels use it.
#pragma once
#include <cstdint>
#include <cstring>

#include "cpu/vec_math.h"

namespace mdl::cpu::vec4 {

using f4 = float __attribute__((vector_size(16)));

inline f4 load4(const float* p) {
  f4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, f4 v) { std::memcpy(p, &v, sizeof v); }
inline f4 splat(float x) { return f4{x, x, x, x}; }
inline double hsum(f4 v) { return (double(v[0]) + double(v[1])) + (double(v[2]) + double(v[3])); }

inline f4 exp4(f4 x) { return vecmath::exp_v(x); }

}  // namespace mdl::cpu::vec4
