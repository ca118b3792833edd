// The fused AdamW step over 10M f32 parameters, against a memory-bandwidth ceiling measured in
// the same run (a STREAM-style triad over the same sizes and threads) and against the same
// update composed of tensor ops (the fused_adamw switch off: several passes and temporaries).
// AdamW moves 28 bytes per parameter: p read+write, g read, exp_avg and exp_avg_sq read+write;
// SGD with momentum 20: p and the momentum buffer read+write, g read.
#include <benchmark/benchmark.h>

#include <cmath>

#include "bench/recording_reporter.h"
#include "mdl.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "switches/list/toggles.h"
#include "optim/clip.h"
#include "bench/switch_bench.h"

using namespace mdl;

namespace {

constexpr int64_t k10M = 10'000'000;

Tensor input(int64_t n, uint64_t seed) {
  Generator g(seed);
  return randn({n}, {}, &g);
}

// a = b + s * c: 12 bytes per element, what a bandwidth-bound kernel can hope for.
void BM_TriadCeiling(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input(n, 1), b = input(n, 2), c = input(n, 3);
  float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>(), *pc = c.data_ptr<float>();
  for (auto _ : state) {
    parallel_for(0, n, 1 << 16, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + 0.5f * pc[i];
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 12 * n);
}

// One AdamW step over n f32 parameters: one fused kernel, or (fused_adamw off) the same update
// composed of tensor ops inside optim::AdamW.
void adamw_step(benchmark::State& state, bool fused) {
  const int64_t n = state.range(0);
  Tensor p = input(n, 1);
  p.set_grad(input(n, 2) * 1e-2);
  optim::AdamW opt({p}, {.lr = 1e-3, .weight_decay = 1e-2});
  opt.step();  // creates the state outside the timed loop
  const bool was = toggles::fused_adamw();
  toggles::set_fused_adamw(fused);
  for (auto _ : state) {
    opt.step();
    benchmark::ClobberMemory();
  }
  toggles::set_fused_adamw(was);
  state.SetBytesProcessed(int64_t(state.iterations()) * 28 * n);
}

// One SGD step with momentum and weight decay over n f32 parameters (one fused pass).
void BM_SGDMomentumStep(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor p = input(n, 1);
  p.set_grad(input(n, 2) * 1e-2);
  optim::SGD opt({p}, {.lr = 1e-3, .momentum = 0.9, .weight_decay = 1e-4});
  opt.step();  // creates the momentum buffer outside the timed loop
  for (auto _ : state) {
    opt.step();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 20 * n);
}

// clip_grad_norm_'s pass: reads 4 bytes per parameter.
void BM_ClipGradNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor p = input(n, 1);
  p.set_grad(input(n, 2));
  for (auto _ : state) benchmark::DoNotOptimize(optim::clip_grad_norm_({p}, 1e30));
  state.SetBytesProcessed(int64_t(state.iterations()) * 4 * n);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("BM_TriadCeiling", BM_TriadCeiling)
      ->Arg(k10M)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (bool fused : {false, true})
    bench::register_switch("fused_adamw", fused, "", adamw_step)
        ->Arg(k10M)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  benchmark::RegisterBenchmark("BM_SGDMomentumStep", BM_SGDMomentumStep)
      ->Arg(k10M)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_ClipGradNorm", BM_ClipGradNorm)
      ->Arg(k10M)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  if (!bench::run_benchmarks(argc, argv)) return 1;
  return 0;
}
