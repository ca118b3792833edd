// bf16 binary ops in the registers (cpu/bf16_binary.h) on 8 floats: this file alone is compiled for AVX2 and FMA
// (by pragma); bf16_binary() calls it only where the CPU has it.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu/bf16_binary.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx2,fma"
#include "cpu/isa_target_begin.h"
#include "cpu/bf16_binary_impl.h"

namespace mdl::cpu {

const Bf16Binary& bf16_binary8() {
  using f32x8 = float __attribute__((vector_size(32)));
  static constexpr Bf16Binary b = bf16_binary_impl::binary<f32x8>();
  return b;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const Bf16Binary& bf16_binary8() { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
