// The sentence mdl-train and mdl-study print on what autocast can buy on this CPU: it names the
// kernel bf16 GEMMs run on, says plainly when 16 bits cannot pay, and follows the switches.
#include <doctest/doctest.h>

#include <string>

#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "switches/list/toggles.h"
#include "tools/mdl_train/cpu_amp_note.h"

using namespace mdl;

TEST_CASE("cpu_amp_note: f16 never pays on the CPU, and the note says whether the CPU has AVX512-FP16") {
  const std::string note = train::cpu_amp_note("f16");
  CHECK(note.find("autocast f16 cannot pay on the CPU") == 0);
  CHECK(note.find(cpu::has_avx512_fp16() ? "this CPU has AVX512-FP16" : "nor has this CPU AVX512-FP16") !=
        std::string::npos);
  CHECK(train::cpu_amp_note("none").empty());
  CHECK(train::cpu_amp_note("").empty());
}

TEST_CASE("cpu_amp_note: bf16 names its GEMM kernel, and cannot pay once no bf16 kernel runs") {
  const cpu::GemmKernel k = cpu::gemm_bf16_values_kernel();
  const std::string note = train::cpu_amp_note("bf16");
  CHECK(note.find(cpu::gemm_kernel_name(k)) != std::string::npos);
  CHECK((note.find("cannot pay") == std::string::npos) == cpu::gemm_kernel_rounds_to_bf16(k));
  toggles::Scoped amx(toggles::Toggle::amx_bf16, false), dot(toggles::Toggle::avx512_bf16_dot, false);
  const std::string off = train::cpu_amp_note("bf16");
  CHECK(off.find("autocast bf16 cannot pay on this CPU") == 0);
  const bool has_bf16 = cpu::gemm_kernel_available(cpu::GemmKernel::amx_bf16) || cpu::has_avx512_bf16();
  CHECK(off.find(has_bf16 ? "switched off" : "neither AMX nor AVX512-BF16") != std::string::npos);
}
