// The fused linear layer on the CPU: y = act(x @ w^T + b) as one GEMM plus one bias+activation
// pass (and one activation-grad+bias-grad pass backward), against the path the models take
// without it: nn::functional::linear (GEMM, bias added in place) then a separate relu/gelu op,
// whose backward adds a mask/derivative pass and a separate bias reduction (with
// linear_bias_epilogue off, so that linear itself is the GEMM and a bias pass). And linear with a
// bias alone, its bias added in the epilogue or in a pass of its own (linear_bias_epilogue). Batch
// 512, 1024 -> 1024, f32, forward and forward+backward; a closing table gives the ratios.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "bench/recording_reporter.h"
#include "bench/switch_bench.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/linear_act.h"
#include "switches/list/toggles.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

constexpr int64_t kBatch = 512, kIn = 1024, kOut = 1024;

Tensor composed(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  Tensor y = F::linear(x, w, b);
  return act == Activation::Relu ? relu(y) : gelu(y, "tanh");
}

// act None: linear with a bias, the toggle linear_bias_epilogue set to fused.
void run(benchmark::State& state, Activation act, bool fused, bool backward) {
  toggles::Scoped epilogue(toggles::Toggle::linear_bias_epilogue, act == Activation::None && fused);
  Generator g(1);
  Tensor x = randn({kBatch, kIn}, {}, &g).requires_grad_(backward);
  Tensor w = (randn({kOut, kIn}, {}, &g) * 0.03).requires_grad_(backward);
  Tensor b = randn({kOut}, {}, &g).requires_grad_(backward);
  Tensor dy = randn({kBatch, kOut}, {}, &g);
  for (auto _ : state) {
    Tensor y = act == Activation::None ? F::linear(x, w, b) : fused ? F::linear(x, w, b, act) : composed(x, w, b, act);
    if (backward) {
      y.backward(dy);
      x.zero_grad(), w.zero_grad(), b.zero_grad();
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  const double gemms = backward ? 3.0 : 1.0;
  // FLOP/s (shown with an SI prefix), as bench/summary.py reads every GFLOP/s counter.
  state.counters["GFLOP/s"] = benchmark::Counter(
      gemms * 2.0 * kBatch * kIn * kOut, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

}  // namespace

int main(int argc, char** argv) {
  const std::pair<const char*, Activation> acts[] = {{"relu", Activation::Relu}, {"gelu", Activation::GeluTanh}};
  for (const char* pass : {"fwd", "fwd_bwd"})
    for (const auto& [name, act] : acts)
      for (bool fused : {false, true}) {
        const bool bwd = std::string(pass) == "fwd_bwd";
        bench::register_switch("fused_linear_act", fused, std::string(pass) + "/" + name,
                               [act, bwd](benchmark::State& s, bool fused) { run(s, act, fused, bwd); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.3);
      }
  for (bool on : {false, true})
    bench::register_switch("linear_bias_epilogue", on, "fwd_bwd/bias",
                           [](benchmark::State& s, bool on) { run(s, Activation::None, on, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);
  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;
  std::printf("\nlinear %lldx%lld -> %lld f32, threads %d: fused (GEMM + one epilogue pass) vs composed\n",
              (long long)kBatch, (long long)kIn, (long long)kOut, get_num_threads());
  for (const char* pass : {"fwd", "fwd_bwd"})
    for (const char* act : {"relu", "gelu"}) {
      const std::string base = std::string(pass) + "/" + act;
      const bench::RunResult* f = reporter.find(bench::switch_benchmark("fused_linear_act", true, base));
      const bench::RunResult* c = reporter.find(bench::switch_benchmark("fused_linear_act", false, base));
      if (f && c)
        std::printf("%-22s composed %8.2f ms  fused %8.2f ms  speed-up x%.2f\n", base.c_str(), c->real, f->real,
                    c->real / f->real);
    }
  const bench::RunResult* e = reporter.find(bench::switch_benchmark("linear_bias_epilogue", true, "fwd_bwd/bias"));
  const bench::RunResult* p = reporter.find(bench::switch_benchmark("linear_bias_epilogue", false, "fwd_bwd/bias"));
  if (e && p)
    std::printf("%-22s bias pass %7.2f ms  epilogue %7.2f ms  speed-up x%.2f\n", "fwd_bwd/bias", p->real, e->real,
                p->real / e->real);
  return 0;
}
