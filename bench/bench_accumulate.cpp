// Gradient accumulation: the effective batch of 512 for SimpleCNN on 28x28 images, as one batch
// against 4 micro-batches of 128 whose gradients add up before one optimizer step. The
// accumulated step keeps only one micro-batch's activations alive, so its peak memory is about
// a quarter of the activations; the time per 512 samples shows what that costs.
#include <benchmark/benchmark.h>

#include "bench/recording_reporter.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "bench/switch_bench.h"

using namespace mdl;

namespace {

constexpr int64_t kBatch = 512;

void step(benchmark::State& state, int64_t micro_batches) {
  manual_seed(0);
  auto model = nn::models::SimpleCNN(1, 10, 28);
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  Generator g(7);
  Tensor x = randn({kBatch, 1, 28, 28}, {}, &g), y = randint(0, 10, {kBatch}, kI64, &g);
  const int64_t micro = kBatch / micro_batches;
  auto run = [&] {
    optim::accumulate_step(opt, micro_batches, [&](int64_t i) {
      return nn::functional::cross_entropy((*model)(x.narrow(0, i * micro, micro)), y.narrow(0, i * micro, micro));
    });
  };
  run();  // optimizer state and first-touch allocations outside the measurement
  int64_t peak = 0;
  for (auto _ : state) {
    const int64_t live = memory_stats().live_bytes;
    reset_peak_memory();
    run();
    peak = std::max(peak, memory_stats().peak_bytes - live);
  }
  state.counters["peak_MB"] = double(peak) / 1e6;
  state.counters["samples/s"] = benchmark::Counter(double(kBatch), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

// Off: one batch of 512; on: 4 micro-batches of 128.
int main(int argc, char** argv) {
  for (bool accumulate : {false, true})
    bench::register_switch("grad_accumulation", accumulate, "simplecnn_step_512",
                           [](benchmark::State& s, bool accumulate) { step(s, accumulate ? 4 : 1); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  if (!bench::run_benchmarks(argc, argv)) return 1;
  return 0;
}
