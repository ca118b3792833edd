// bf16 batch norm's row loops (cpu/bf16_batch_norm_rows.h) on 8 floats: this file alone is compiled for AVX2 and FMA
// (by pragma); bf16_batch_norm_rows() calls it only where the CPU has it.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu/bf16_batch_norm_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx2,fma"
#include "cpu/isa_target_begin.h"
#include "cpu/bf16_batch_norm_rows_impl.h"

namespace mdl::cpu {

const Bf16BatchNormRows& bf16_batch_norm_rows8() {
  using f32x8 = float __attribute__((vector_size(32)));
  static constexpr Bf16BatchNormRows r = bf16_batch_norm_rows_impl::rows<f32x8>();
  return r;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const Bf16BatchNormRows& bf16_batch_norm_rows8() { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
