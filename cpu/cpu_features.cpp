// has_avx2_fma, has_avx512f: cpuid through GCC's __builtin_cpu_supports (which also checks that the
// OS saves the wider registers), cached.
#include "cpu/cpu_features.h"

namespace mdl::cpu {

bool has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = [] {
    __builtin_cpu_init();  // safe before main too (a test's skip decorator asks at static init)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return yes;
#else
  return false;
#endif
}

bool has_avx512f() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
#else
  return false;
#endif
}

}  // namespace mdl::cpu
