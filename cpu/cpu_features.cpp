// has_avx2_fma, has_avx512f, has_avx512bw, has_avx512_bf16: cpuid through GCC's __builtin_cpu_supports (which also
// checks that the OS saves the wider registers), cached; has_avx512_fp16 reads its cpuid bit itself
// (GCC 12's and clang 14's builtins differ on its name); the model name from /proc/cpuinfo.
#include "cpu/cpu_features.h"

#include <fstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

bool has_avx512bw() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = [] {
    __builtin_cpu_init();
    return has_avx512f() && __builtin_cpu_supports("avx512bw");
  }();
  return yes;
#else
  return false;
#endif
}

bool has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = [] {
    __builtin_cpu_init();
    return has_avx512f() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  }();
  return yes;
#else
  return false;
#endif
}

bool has_avx512_fp16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool yes = [] {
    unsigned a, b, c, d;  // CPUID leaf 7, subleaf 0: EDX bit 23 is AVX512-FP16
    return has_avx512f() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 23 & 1);
  }();
  return yes;
#else
  return false;
#endif
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "unknown CPU";
}

}  // namespace mdl::cpu
