// The attention's column loops (cpu/attention_lanes.h) on 16 floats: this file alone is compiled for
// AVX-512F (by pragma); attention_lanes() calls it only where the CPU has it.
#include <cstdlib>

#include "cpu/attention_lanes.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // before the region: vec_math.h's VSCALEFPS

#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"
#include "cpu/attention_lanes_impl.h"

namespace mdl::cpu {

const AttentionLanes& attention_lanes16() {
  using f32x16 = float __attribute__((vector_size(64)));
  static constexpr AttentionLanes r = attention_lanes_impl::lanes<f32x16>();
  return r;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const AttentionLanes& attention_lanes16() { std::abort(); }  // has_avx512f() is false here
}  // namespace mdl::cpu
#endif
