// The sentence: f16 always computes in f32 on the CPU (mdl has no AVX512-FP16 kernels); bf16
// multiplies its GEMMs in bf16 where AMX or AVX512-BF16 runs them, and otherwise only converts.
#include "tools/mdl_train/cpu_amp_note.h"

#include "cpu/cpu_features.h"
#include "cpu/gemm.h"

namespace mdl::train {

std::string cpu_amp_note(const std::string& amp) {
  if (amp == "f16")
    return std::string("autocast f16 cannot pay on the CPU: mdl's CPU kernels compute f16 in f32 between "
                       "conversions, having no AVX512-FP16 kernels") +
           (cpu::has_avx512_fp16() ? " (this CPU has AVX512-FP16)" : " (nor has this CPU AVX512-FP16)") +
           ", so the casts are pure cost and only memory is saved";
  if (amp != "bf16") return "";
  const cpu::GemmKernel k = cpu::gemm_bf16_values_kernel();
  const std::string name = cpu::gemm_kernel_name(k);
  if (cpu::gemm_kernel_rounds_to_bf16(k))
    return "autocast bf16 multiplies its matmuls and convs in bf16 on this CPU (" + name +
           "); activations stay bf16 between ops, which compute in f32 in their registers";
  const bool has_bf16 = cpu::gemm_kernel_available(cpu::GemmKernel::amx_bf16) || cpu::has_avx512_bf16();
  return std::string("autocast bf16 cannot pay on this CPU: ") +
         (has_bf16 ? "its bf16 kernels are switched off (amx_bf16, avx512_bf16_dot)"
                   : "it has neither AMX nor AVX512-BF16") +
         ", so bf16 values are multiplied in f32 (" + name +
         "): activations stay bf16 between ops, and the halved bytes at best pay for widening them";
}

}  // namespace mdl::train
