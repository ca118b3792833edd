// The layer norm row loops (cpu/layer_norm_rows.h) on 8 floats: this file alone is compiled for AVX2 and FMA
// (by pragma); layer_norm_rows() calls it only where the CPU has it.
#include <cstdlib>

#include "cpu/layer_norm_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#include "cpu/layer_norm_rows_impl.h"

namespace mdl::cpu {

const LayerNormRows& layer_norm_rows8() {
  using f32x8 = float __attribute__((vector_size(32)));
  static constexpr LayerNormRows r = layer_norm_rows_impl::rows<f32x8>();
  return r;
}

}  // namespace mdl::cpu
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#else
namespace mdl::cpu {
const LayerNormRows& layer_norm_rows8() { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
