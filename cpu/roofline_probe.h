// The CPU's roofline ceilings, measured here and now: the f32 FMA peak of each instruction set the
// CPU has (AVX2+FMA, AVX-512F), the bf16 dot-product peak (AVX512-BF16, AMX) where it has one, and
// the triad bandwidth of memory (over 4x the last-level cache, at most 384 MiB) and of L2. Every loop runs on mdl's
// compute threads (parallel_for, get_num_threads()); each ceiling is the best of a few timed tries.
#pragma once
#include <vector>

#include "profiler/roofline.h"

namespace mdl::cpu {

struct ProbeOptions {
  // Many short tries: on a machine shared with other work, the least disturbed of many short windows
  // comes closest to what the hardware does.
  double seconds = 0.02;  // about this long per timed try
  int tries = 10;
};

profiler::CpuCeilings measure_cpu_ceilings(const ProbeOptions& options = {});

// The pieces, for checks: GFLOP/s of the FMA chains ("avx2-fma", "avx512f") or bf16 products
// ("avx512-bf16", "amx-bf16"); GB/s of the triad over three arrays of `array_bytes` each (per
// thread when per_thread, else shared). An instruction set this CPU lacks is an mdl::Error.
double peak_gflops(const char* isa, const ProbeOptions& options = {});
// The f32 FMA peak of each instruction set this CPU has, as measure_cpu_ceilings records them.
std::vector<profiler::Rate> f32_fma_peaks(const ProbeOptions& options = {});
double triad_gbs(int64_t array_bytes, bool per_thread, const ProbeOptions& options = {});
int64_t last_level_cache_bytes();  // 32 MiB when the system does not say
int64_t l2_cache_bytes();          // per core; 1 MiB when the system does not say

}  // namespace mdl::cpu
