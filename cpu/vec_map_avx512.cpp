// vec_map's 16-float width: this file alone is compiled for AVX-512F (by pragma); vec_map calls it
// only where the CPU has it and the avx512_vec_math switch is on.
#include <cstdint>
#include <cstdlib>

#include "cpu/vec_map.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // before the region: vec_math.h's VSCALEFPS

#define MDL_ISA_TARGET "avx512f,fma"
#include "cpu/isa_target_begin.h"
#include "cpu/vec_map_impl.h"

namespace mdl::cpu {

void vec_map16(VecFn f, float* o, const float* x, int64_t n) {
  using f16x = float __attribute__((vector_size(64)));
  detail::map_fn<f16x>(f, o, x, n);
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
void vec_map16(VecFn, float*, const float*, int64_t) { std::abort(); }  // has_avx512f() is false here
}  // namespace mdl::cpu
#endif
