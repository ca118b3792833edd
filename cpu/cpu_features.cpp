// has_avx2_fma: cpuid through GCC's __builtin_cpu_supports, cached.
#include "cpu/cpu_features.h"

namespace mdl::cpu {

bool has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

}  // namespace mdl::cpu
