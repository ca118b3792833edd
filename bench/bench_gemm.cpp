// The f32 GEMM ladder on square sizes: naive, cache-blocked, packed + SIMD on one thread, the full
// threaded gemm_f32, and OpenBLAS cblas_sgemm on as many threads (built with -DMDL_HAVE_OPENBLAS,
// at the core family this CPU runs: bench/openblas_yardstick.h). The avx512_gemm switch pair runs
// threaded gemm_f32 on the AVX2 and on the AVX-512 micro-kernel; the gemm_vector_pack pair a linear
// layer's forward, whose weight the GEMM packs from its transpose. Ends with a table of threaded
// gemm_f32 against OpenBLAS at each size, naming each kernel that ran.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/recording_reporter.h"
#include "bench/openblas_yardstick.h"
#include "bench/switch_bench.h"
#include "cpu/gemm.h"
#include "tensor/float_mode.h"
#include "switches/list/toggles.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using GemmFn = std::function<void(int64_t n, const float* A, const float* B, float* C)>;

// n values drawn uniformly from [-1, 1).
std::vector<float> uniform(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void run_gemm(benchmark::State& state, int64_t n, const GemmFn& fn) {
  std::mt19937 rng(42);
  const std::vector<float> A = uniform(n * n, rng), B = uniform(n * n, rng);
  std::vector<float> C(n * n);
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

// y = x @ w^T as nn.Linear's forward runs it: x (batch, in) and w (out, in) row-major, so B = w^T is
// stored transposed. The gemm_vector_pack pair.
void linear_forward(benchmark::State& state, int64_t batch, int64_t in, int64_t out, bool vector_pack) {
  mdl::toggles::Scoped pack(mdl::toggles::Toggle::gemm_vector_pack, vector_pack);
  std::mt19937 rng(3);
  const std::vector<float> x = uniform(batch * in, rng), w = uniform(out * in, rng);
  std::vector<float> y(batch * out);
  for (auto _ : state) {
    mdl::cpu::gemm_f32(batch, out, in, 1.0f, x.data(), in, 1, w.data(), 1, in, 0.0f, y.data(), out, 1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * double(batch) * in * out, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// C = A @ B (512^3) with B scaled by 1e-38, so every product and partial sum is a denormal float:
// the flush_denormal pair.
void denormal_gemm(benchmark::State& state, bool flush) {
  mdl::toggles::set_flush_denormal(flush);
  const int64_t n = 512;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(0.5f, 1.0f);
  std::vector<float> A(n * n), B(n * n), C(n * n);
  for (auto& x : A) x = dist(rng);
  for (auto& x : B) x = dist(rng) * 1e-38f / float(n);
  for (auto _ : state) {
    mdl::cpu::gemm_f32(n, n, n, 1.0f, A.data(), n, 1, B.data(), n, 1, 0.0f, C.data(), n, 1);
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(n) * n * n, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  mdl::toggles::set_flush_denormal(true);
}

}  // namespace

int main(int argc, char** argv) {
#ifdef MDL_HAVE_OPENBLAS
  const std::string openblas_core = bench::openblas_at_its_core(argv);
#endif
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
    for (bool on : {false, true}) {
      bench::register_switch("avx512_gemm", on, std::to_string(n),
                             [n](benchmark::State& s, bool avx512) {
                               mdl::toggles::set_avx512_gemm(avx512);
                               run_gemm(s, n, threaded);
                               mdl::toggles::set_avx512_gemm(true);
                             })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      bench::register_switch("bf16_gemm", on, std::to_string(n),
                             [n](benchmark::State& s, bool bf16) {
                               mdl::toggles::set_bf16_gemm(bf16);
                               run_gemm(s, n, threaded);
                               mdl::toggles::set_bf16_gemm(false);
                             })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
#ifdef MDL_HAVE_OPENBLAS
    reg("openblas", [](int64_t m, const float* A, const float* B, float* C) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(m), int(m), 1.0f, A, int(m), B, int(m), 0.0f,
                  C, int(m));
    });
#endif
  }

  struct LinearShape {
    const char* name;
    int64_t batch, in, out;
  };
  for (const LinearShape& l : {LinearShape{"linear_fwd_b128_3136to128", 128, 3136, 128},
                               LinearShape{"linear_fwd_b512_1024to1024", 512, 1024, 1024}})
    for (bool on : {false, true})
      bench::register_switch("gemm_vector_pack", on, l.name,
                             [l](benchmark::State& s, bool on) { linear_forward(s, l.batch, l.in, l.out, on); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();

  for (bool flush : {false, true})
    bench::register_switch("flush_denormal", flush, "denormal_512", denormal_gemm)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();

  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;

  mdl::toggles::set_avx512_gemm(false);
  const std::string narrow_kernel = mdl::cpu::gemm_f32_kernel_name();
  mdl::toggles::set_avx512_gemm(true);
  mdl::toggles::set_bf16_gemm(true);
  const std::string bf16_kernel = mdl::cpu::gemm_f32_kernel_name();
  mdl::toggles::set_bf16_gemm(false);
  std::printf("\nmicro-kernel: %s; avx512_gemm off: %s; bf16_gemm on: %s; threads: %d\n",
              mdl::cpu::gemm_f32_kernel_name(), narrow_kernel.c_str(), bf16_kernel.c_str(), threads);
#ifdef MDL_HAVE_OPENBLAS
  const double diff = bench::openblas_product_difference();
  std::printf("%s; its product differs from mdl's by %.1e of the largest entry%s\n", openblas_core.c_str(), diff,
              diff <= 1e-4 ? "" : ": WRONG RESULTS, the OpenBLAS column is no yardstick on this machine");
#endif
  std::printf("%6s %13s %13s %7s %13s %7s %13s %7s\n", "size", "avx512 off", "avx512 on", "ratio", "bf16 on", "ratio",
              "OpenBLAS", "f32/OB");
  auto find = [&](const std::string& name) {
    const bench::RunResult* r = reporter.find(name);
    return r ? r->counter("GFLOP/s", 1e-9) : -1.0;
  };
  for (int64_t n : sizes) {
    const std::string s = std::to_string(n);
    const double narrow = find(bench::switch_benchmark("avx512_gemm", false, s));
    const double wide = find(bench::switch_benchmark("avx512_gemm", true, s));
    const double f32 = find(bench::switch_benchmark("bf16_gemm", false, s));
    const double bf16 = find(bench::switch_benchmark("bf16_gemm", true, s)), ref = find("openblas/" + s);
    if (narrow < 0 || wide < 0 || f32 < 0 || bf16 < 0) continue;
    std::printf("%6s %13.1f %13.1f %6.2fx %13.1f %6.2fx", s.c_str(), narrow, wide, wide / narrow, bf16, bf16 / f32);
    if (ref < 0) std::printf(" %13s %7s\n", "-", "-");
    else std::printf(" %13.1f %6.0f%%\n", ref, 100.0 * wide / ref);
  }
  std::printf("(GFLOP/s; each ratio is a switch pair run in this process: on / off)\n");
  return 0;
}
