// The softmax row loops (cpu/softmax_rows.h) on 8 floats: this file alone is compiled for AVX2 and FMA
// (by pragma); softmax_rows() calls it only where the CPU has both.
#include <cstdlib>

#include "cpu/softmax_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx2,fma"
#include "cpu/isa_target_begin.h"
#include "cpu/softmax_rows_impl.h"

namespace mdl::cpu {

const SoftmaxRows& softmax_rows8() {
  using f32x8 = float __attribute__((vector_size(32)));
  static constexpr SoftmaxRows r = softmax_rows_impl::rows<f32x8>();
  return r;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const SoftmaxRows& softmax_rows8() { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
