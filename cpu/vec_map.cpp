// vec_map's 4-float (SSE2) width and the run-time choice between it and the AVX2 one.
#include "cpu/cpu_features.h"
#include "cpu/vec_map_impl.h"

namespace mdl::cpu {

void vec_map4(VecFn f, float* o, const float* x, int64_t n) {
  using f4 = float __attribute__((vector_size(16)));
  detail::map_fn<f4>(f, o, x, n);
}

void vec_map(VecFn f, float* o, const float* x, int64_t n) {
  if (has_avx2_fma()) return vec_map8(f, o, x, n);
  vec_map4(f, o, x, n);
}

}  // namespace mdl::cpu
