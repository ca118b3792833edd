// What the CPU can run, asked once: the AVX2 + FMA kernels (GEMM, depthwise conv, attention, the
// vector math) and the AVX-512 GEMM kernel are chosen at run time, so one binary runs on any x86-64.
#pragma once
#include <string>

namespace mdl::cpu {

bool has_avx2_fma();
bool has_avx512f();      // AVX-512 Foundation, with the OS saving zmm state
bool has_avx512bw();     // AVX-512 BW (byte and 16-bit word lanes, masks) besides AVX-512F
bool has_avx512_bf16();  // AVX512-BF16 (vdpbf16ps) besides AVX-512F and BW
bool has_avx512_fp16();  // AVX512-FP16 (f16 arithmetic: Sapphire Rapids and later), besides AVX-512F

// The CPU's name as lscpu prints it ("model name" in /proc/cpuinfo); "unknown CPU" when not found.
std::string cpu_model_name();

}  // namespace mdl::cpu
