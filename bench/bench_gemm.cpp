// The f32 GEMM ladder on square sizes: naive, cache-blocked, packed + SIMD on one thread, the full
// threaded gemm_f32, and OpenBLAS cblas_sgemm on as many threads (built with -DMDL_HAVE_OPENBLAS).
// Ends with a table of threaded gemm_f32 against OpenBLAS at each size.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm.h"

#ifdef MDL_HAVE_OPENBLAS
#include <cblas.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using GemmFn = std::function<void(int64_t n, const float* A, const float* B, float* C)>;

void run_gemm(benchmark::State& state, int64_t n, const GemmFn& fn) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> A(n * n), B(n * n), C(n * n);
  for (auto& x : A) x = dist(rng);
  for (auto& x : B) x = dist(rng);
  for (auto _ : state) {
    fn(n, A.data(), B.data(), C.data());
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(n) * n * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void threaded(int64_t n, const float* A, const float* B, float* C) {
  mdl::cpu::gemm_f32(n, n, n, 1.0f, A, n, 1, B, n, 1, 0.0f, C, n, 1);
}

// Console output as usual, and each run's GFLOP/s kept by "variant/size" for the closing table.
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> gflops;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      auto it = r.counters.find("GFLOP/s");
      if (it != r.counters.end() && r.run_type == Run::RT_Iteration)
        gflops[r.run_name.function_name] = it->second.value / 1e9;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
#ifdef MDL_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  const std::vector<int64_t> sizes = {256, 512, 1024, 2048};
  for (int64_t n : sizes) {
    auto reg = [&](const std::string& variant, GemmFn fn) {
      const std::string name = variant + "/" + std::to_string(n);
      return benchmark::RegisterBenchmark(name.c_str(), [n, fn](benchmark::State& s) { run_gemm(s, n, fn); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    };
    if (n <= 1024) {
      auto* b = reg("naive", [](int64_t m, const float* A, const float* B, float* C) {
        mdl::cpu::gemm_f32_naive(m, m, m, A, B, C);
      });
      if (n == 1024) b->Iterations(1);
    }
    auto* b = reg("blocked", [](int64_t m, const float* A, const float* B, float* C) {
      mdl::cpu::gemm_f32_blocked(m, m, m, A, B, C);
    });
    if (n == 2048) b->Iterations(1);
    reg("packed_1thread",
        [](int64_t m, const float* A, const float* B, float* C) { mdl::cpu::gemm_f32_packed(m, m, m, A, B, C); });
    reg("threaded", threaded);
#ifdef MDL_HAVE_OPENBLAS
    reg("openblas", [](int64_t m, const float* A, const float* B, float* C) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(m), int(m), 1.0f, A, int(m), B, int(m), 0.0f,
                  C, int(m));
    });
#endif
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf("\nmicro-kernel: %s, threads: %d\n", mdl::cpu::gemm_f32_kernel_name(), threads);
  std::printf("%8s %18s %18s %8s\n", "size", "mdl GFLOP/s", "OpenBLAS GFLOP/s", "ratio");
  for (int64_t n : sizes) {
    const std::string s = std::to_string(n);
    auto ours = reporter.gflops.find("threaded/" + s), ref = reporter.gflops.find("openblas/" + s);
    if (ours == reporter.gflops.end()) continue;
    if (ref == reporter.gflops.end()) std::printf("%8s %18.1f %18s %8s\n", s.c_str(), ours->second, "-", "-");
    else
      std::printf("%8s %18.1f %18.1f %7.0f%%\n", s.c_str(), ours->second, ref->second,
                  100.0 * ours->second / ref->second);
  }
  return 0;
}
