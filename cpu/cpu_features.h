// What the CPU can run, asked once: the AVX2 + FMA kernels (GEMM, depthwise conv, attention, the
// vector math) and the AVX-512 GEMM kernel are chosen at run time, so one binary runs on any x86-64.
#pragma once

namespace mdl::cpu {

bool has_avx2_fma();
bool has_avx512f();  // AVX-512 Foundation, with the OS saving zmm state

}  // namespace mdl::cpu
