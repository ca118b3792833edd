// OpenBLAS as a fair yardstick. Debian's OpenBLAS 0.3.21 picks its kernels per CPU at load time and
// does not know newer ones (Sapphire and Emerald Rapids, Zen 4): it falls back to its generic
// Prescott core, several times slower. When that happened on a CPU with AVX-512 or AVX2, the
// benchmark runs itself again with OPENBLAS_CORETYPE set to the family that CPU belongs to
// (SkylakeX or Haswell), for that run alone, and says so. An environment that already sets
// OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE is left as it is. Since an old OpenBLAS may compute wrong
// results on a CPU it does not know, its product is checked against mdl's before it is trusted.
#pragma once
#ifdef MDL_HAVE_OPENBLAS
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/gemm.h"

namespace bench {

// The OpenBLAS core family this CPU should run, or "" when the one OpenBLAS chose already fits.
inline std::string openblas_better_core(const std::string& chosen) {
  static const std::set<std::string> avx512 = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  static const std::set<std::string> avx2 = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
  if (mdl::cpu::has_avx512f()) return avx512.count(chosen) ? "" : "SkylakeX";
  if (mdl::cpu::has_avx2_fma()) return avx2.count(chosen) ? "" : "Haswell";
  return "";
}

// Call first in main. May run the program again (exec) with OPENBLAS_CORETYPE set; returns a line
// saying which core OpenBLAS runs and why.
inline std::string openblas_at_its_core(char** argv) {
  const std::string chosen = openblas_get_corename();
  if (const char* was = std::getenv("MDL_OPENBLAS_CORE_WAS"))
    return "OpenBLAS core: " + chosen + " (OPENBLAS_CORETYPE set for this run; on its own OpenBLAS chose " + was +
           " on this CPU)";
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("OPENBLAS_L2_SIZE"))
    return "OpenBLAS core: " + chosen + " (as the environment's OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE set it)";
  const std::string better = openblas_better_core(chosen);
  if (!better.empty()) {
    setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
    setenv("MDL_OPENBLAS_CORE_WAS", chosen.c_str(), 1);
    execv("/proc/self/exe", argv);  // returns only on failure: go on with the core OpenBLAS chose
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("MDL_OPENBLAS_CORE_WAS");
    return "OpenBLAS core: " + chosen + " (a generic core; running again with OPENBLAS_CORETYPE=" + better + " failed)";
  }
  return "OpenBLAS core: " + chosen + " (its own choice)";
}

// The largest difference between cblas_sgemm's and gemm_f32's product of two random matrices,
// relative to the largest entry; a correct OpenBLAS stays near 1e-6.
inline double openblas_product_difference() {
  const int m = 193, n = 211, k = 517;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> A(size_t(m) * k), B(size_t(k) * n), ours(size_t(m) * n), theirs(size_t(m) * n);
  for (auto& x : A) x = dist(rng);
  for (auto& x : B) x = dist(rng);
  mdl::cpu::gemm_f32(m, n, k, 1.0f, A.data(), k, 1, B.data(), n, 1, 0.0f, ours.data(), n, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A.data(), k, B.data(), n, 0.0f, theirs.data(),
              n);
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double d = std::abs(double(ours[i]) - double(theirs[i]));
    if (!(d <= diff)) diff = d;  // a NaN stays
    scale = std::max(scale, std::abs(double(ours[i])));
  }
  return diff / scale;
}

}  // namespace bench
#endif
