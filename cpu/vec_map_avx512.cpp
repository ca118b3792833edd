// vec_map's 16-float width: this file alone is compiled for AVX-512F (by pragma); vec_map calls it
// only where the CPU has it and the avx512_vec_math switch is on.
#include <cstdint>
#include <cstdlib>

#include "cpu/vec_map.h"

#if defined(__x86_64__) || defined(__i386__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif
#include "cpu/vec_map_impl.h"

namespace mdl::cpu {

void vec_map16(VecFn f, float* o, const float* x, int64_t n) {
  using f16x = float __attribute__((vector_size(64)));
  detail::map_fn<f16x>(f, o, x, n);
}

}  // namespace mdl::cpu
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
namespace mdl::cpu {
void vec_map16(VecFn, float*, const float*, int64_t) { std::abort(); }  // has_avx512f() is false here
}  // namespace mdl::cpu
#endif
