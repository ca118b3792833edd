// The attention's column loops (cpu/attention_lanes.h) on 4 floats (SSE2, every x86-64 CPU), and the
// choice of width.
#include "cpu/attention_lanes.h"

#include "cpu/attention_lanes_impl.h"
#include "cpu/cpu_features.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

const AttentionLanes& attention_lanes4() {
  using f32x4 = float __attribute__((vector_size(16)));
  static constexpr AttentionLanes r = attention_lanes_impl::lanes<f32x4>();
  return r;
}

const AttentionLanes& attention_lanes(int64_t width) {
  if (width % 16 == 0 && has_avx512f() && toggles::avx512_vec_math()) return attention_lanes16();
  if (width % 8 == 0 && has_avx2_fma()) return attention_lanes8();
  return attention_lanes4();
}

}  // namespace mdl::cpu
