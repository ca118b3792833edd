// vec_map's 8-float width: this file alone is compiled for AVX2 and FMA (by pragma), so the rest
// of the build stays baseline x86-64; vec_map calls it only where the CPU has both.
#include <cstdint>
#include <cstdlib>

#include "cpu/vec_map.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx2,fma"
#include "cpu/isa_target_begin.h"
#include "cpu/vec_map_impl.h"

namespace mdl::cpu {

void vec_map8(VecFn f, float* o, const float* x, int64_t n) {
  using f8 = float __attribute__((vector_size(32)));
  detail::map_fn<f8>(f, o, x, n);
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
void vec_map8(VecFn, float*, const float*, int64_t) { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
