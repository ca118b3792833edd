// bf16 binary ops in the registers (cpu/bf16_binary.h) on 16 floats: this file alone is compiled for AVX-512F
// (by pragma); bf16_binary() calls it only where the CPU has it.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu/bf16_binary.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"
#include "cpu/bf16_binary_impl.h"

namespace mdl::cpu {

const Bf16Binary& bf16_binary16() {
  using f32x16 = float __attribute__((vector_size(64)));
  static constexpr Bf16Binary b = bf16_binary_impl::binary<f32x16>();
  return b;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const Bf16Binary& bf16_binary16() { std::abort(); }  // has_avx512f() is false here
}  // namespace mdl::cpu
#endif
