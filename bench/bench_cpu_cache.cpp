// The CPU allocator's large-block cache, off vs on: `add` of two f32 tensors into a fresh
// output, 4M elements (16 MiB) and 16M elements (64 MiB). Off, glibc hands large blocks back to
// the kernel on free, so each output's first touch page-faults; on, the freed block is reused.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <utility>
#include <string>

#include "bench/recording_reporter.h"
#include "bench/switch_bench.h"
#include "mdl.h"
#include "cpu/block_cache.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {

void BM_Add(benchmark::State& state, int64_t n, bool cached) {
  const bool was = toggles::cpu_block_cache();
  toggles::set_cpu_block_cache(cached);
  Tensor a = rand({n}), b = rand({n});
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 12);
  toggles::set_cpu_block_cache(was);
}

}  // namespace

int main(int argc, char** argv) {
  const std::pair<const char*, int64_t> sizes[] = {{"4M", 4 << 20}, {"16M", 16 << 20}};
  for (const auto& [label, n] : sizes)
    for (bool cached : {false, true})
      bench::register_switch("cpu_block_cache", cached, std::string("add_fresh_output_") + label,
                             [n = n](benchmark::State& s, bool cached) { BM_Add(s, n, cached); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;
  std::printf("\nadd into a fresh output, large-block cache off vs on (threads %d):\n", get_num_threads());
  for (const auto& [label, n] : sizes) {
    const std::string case_name = std::string("add_fresh_output_") + label;
    const bench::RunResult* off = reporter.find(bench::switch_benchmark("cpu_block_cache", false, case_name));
    const bench::RunResult* on = reporter.find(bench::switch_benchmark("cpu_block_cache", true, case_name));
    if (off && on)
      std::printf("  %4s f32: off %8.2f ms  on %8.2f ms  speed-up x%.2f\n", label, off->real, on->real,
                  off->real / on->real);
  }
  return 0;
}
