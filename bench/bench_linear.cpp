// The fused linear layer on the CPU: y = act(x @ w^T + b) as one GEMM plus one bias+activation
// pass (and one activation-grad+bias-grad pass backward), against the path the models take
// without it: nn::functional::linear (GEMM, bias added in place) then a separate relu/gelu op,
// whose backward adds a mask/derivative pass and a separate bias reduction. Batch 512,
// 1024 -> 1024, f32, forward and forward+backward; a closing table gives the ratios.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "bench/recording_reporter.h"
#include "bench/switch_bench.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/linear_act.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

constexpr int64_t kBatch = 512, kIn = 1024, kOut = 1024;

Tensor composed(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  Tensor y = F::linear(x, w, b);
  return act == Activation::Relu ? relu(y) : gelu(y, "tanh");
}

void run(benchmark::State& state, Activation act, bool fused, bool backward) {
  Generator g(1);
  Tensor x = randn({kBatch, kIn}, {}, &g).requires_grad_(backward);
  Tensor w = (randn({kOut, kIn}, {}, &g) * 0.03).requires_grad_(backward);
  Tensor b = randn({kOut}, {}, &g).requires_grad_(backward);
  Tensor dy = randn({kBatch, kOut}, {}, &g);
  for (auto _ : state) {
    Tensor y = fused ? F::linear(x, w, b, act) : composed(x, w, b, act);
    if (backward) {
      y.backward(dy);
      x.zero_grad(), w.zero_grad(), b.zero_grad();
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  const double gemms = backward ? 3.0 : 1.0;
  state.counters["GFLOP/s"] = benchmark::Counter(gemms * 2.0 * kBatch * kIn * kOut * double(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
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
  return 0;
}
