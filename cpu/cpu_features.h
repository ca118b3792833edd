// What the CPU can run, asked once: the AVX2 + FMA kernels (GEMM, depthwise conv, attention, the
// vector math) are chosen at run time, so one binary runs on any x86-64.
#pragma once

namespace mdl::cpu {

bool has_avx2_fma();

}  // namespace mdl::cpu
