// The attention's column loops (cpu/attention_lanes.h) on 8 floats: this file alone is compiled for
// AVX2 and FMA (by pragma); attention_lanes() calls it only where the CPU has both.
#include <cstdlib>

#include "cpu/attention_lanes.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx2,fma"
#include "cpu/isa_target_begin.h"
#include "cpu/attention_lanes_impl.h"

namespace mdl::cpu {

const AttentionLanes& attention_lanes8() {
  using f32x8 = float __attribute__((vector_size(32)));
  static constexpr AttentionLanes r = attention_lanes_impl::lanes<f32x8>();
  return r;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const AttentionLanes& attention_lanes8() { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
