// What the profiler costs: one SimpleCNN training step (batch 128, SGD) with profiling off (one
// branch per hook), on (kernels, backward nodes, modules, memory), and on with shapes; each
// profiled iteration includes starting and stopping its session. Then the cost per kernel call,
// on a 16-element add: the slot called directly, through the hook with profiling off, and recorded.
// Closing lines give the ratios (medians when --benchmark_repetitions is given).
//   --mdl_table=1      first prints the table of 3 profiled steps (after a warm-up)
//   --mdl_trace=PATH   and writes their Chrome trace to PATH
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "bench/recording_reporter.h"
#include "mdl.h"
#include "nn/models/models.h"
#include "profiler/session.h"
#include "kernels/core.h"

using namespace mdl;

namespace {

constexpr int64_t kBatch = 128;

struct CnnStep {
  std::shared_ptr<nn::Sequential> model = nn::models::SimpleCNN(1, 10, 28);
  optim::SGD opt{model->parameters(), {.lr = 0.01, .momentum = 0.9}};
  Tensor x = randn({kBatch, 1, 28, 28}), y = randint(0, 10, {kBatch});
  void run() {
    opt.zero_grad();
    Tensor loss;
    {
      profiler::Phase p(profiler::kForward);
      loss = nn::functional::cross_entropy((*model)(x), y);
    }
    {
      profiler::Phase p(profiler::kBackward);
      loss.backward();
    }
    {
      profiler::Phase p(profiler::kOptimizer);
      opt.step();
    }
  }
};

void BM_CnnStep(benchmark::State& state) {
  const int mode = int(state.range(0));  // 0 off, 1 on, 2 on with shapes
  CnnStep step;
  step.run();
  size_t events = 0;
  for (auto _ : state) {
    if (mode == 0) {
      step.run();
      continue;
    }
    profiler::Session prof({.record_shapes = mode == 2});
    step.run();
    prof.stop();
    events = prof.events().size();
  }
  state.counters["events"] = double(events);
  state.SetLabel(mode == 0 ? "profiler off" : mode == 1 ? "profiler on" : "profiler on, shapes");
}

// One 16-element add per iteration. Mode 0: the CPU slot itself; 1: through the Stub with
// profiling off; 2: recorded by a session (started outside the loop, so this is the per-event cost).
void BM_KernelCall(benchmark::State& state) {
  const int mode = int(state.range(0));
  Tensor a = randn({16}), out = empty({16});
  kernels::binary(Device::cpu(), BinaryOp::Add, out, a, a);
  std::unique_ptr<profiler::Session> prof;
  if (mode == 2)
    prof = std::make_unique<profiler::Session>(profiler::Options{.memory = false, .record_modules = false});
  for (auto _ : state) {
    if (mode == 0) kernels::binary.cpu(BinaryOp::Add, out, a, a);
    else kernels::binary(Device::cpu(), BinaryOp::Add, out, a, a);
    benchmark::ClobberMemory();
  }
  if (prof) prof->stop();
  state.SetLabel(mode == 0 ? "slot called directly" : mode == 1 ? "hook, profiler off" : "hook, recorded");
}

void print_profile(const char* trace_path) {
  CnnStep step;
  step.run();
  profiler::Session prof({.record_shapes = true, .memory = true});
  for (int i = 0; i < 3; ++i) {
    step.run();
    prof.step();
  }
  prof.stop();
  std::cout << prof.table({.row_limit = 25}) << "\n";
  if (trace_path) {
    prof.export_chrome_trace(trace_path);
    std::cout << "trace: " << trace_path << " (" << prof.events().size() << " events)\n\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool table = false;
  const char* trace = nullptr;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mdl_table=", 12) == 0) table = std::strcmp(argv[i] + 12, "0") != 0;
    else if (std::strncmp(argv[i], "--mdl_trace=", 12) == 0) trace = argv[i] + 12;
    else argv[kept++] = argv[i];
  }
  argc = kept;
  manual_seed(0);
  if (table || trace) print_profile(trace);

  benchmark::RegisterBenchmark("simple_cnn_step/batch128", BM_CnnStep)
      ->Arg(0)
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(2.0);
  // A fixed count bounds the recorded session's memory (about 300 bytes per event).
  benchmark::RegisterBenchmark("kernel_call/add16", BM_KernelCall)
      ->Arg(0)
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kNanosecond)
      ->UseRealTime()
      ->Iterations(200'000);
  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;
  const std::string step = "simple_cnn_step/batch128", call = "kernel_call/add16";
  std::printf("\nthreads: %d\n", get_num_threads());
  for (bool cpu : {false, true}) {
    auto t = [&](const std::string& name, int64_t mode) {
      const bench::RunResult* v = reporter.find(name + "/" + std::to_string(mode));
      return !v ? 0.0 : cpu ? v->cpu : v->real;
    };
    const char* clock = cpu ? "CPU " : "real";
    if (double off = t(step, 0); off > 0 && t(step, 1) > 0 && t(step, 2) > 0)
      std::printf("%s: SimpleCNN step, batch %lld: off %.1f ms, on %.1f ms (%.3fx), on with shapes %.1f ms (%.3fx)\n",
                  clock, (long long)kBatch, off, t(step, 1), t(step, 1) / off, t(step, 2), t(step, 2) / off);
    if (double direct = t(call, 0); direct > 0 && t(call, 1) > 0 && t(call, 2) > 0)
      std::printf(
          "%s: kernel call (16-element add): slot %.1f ns, hook off %.1f ns (%+.1f ns), recorded %.1f ns (%+.1f ns per event)\n",
          clock, direct, t(call, 1), t(call, 1) - direct, t(call, 2), t(call, 2) - direct);
  }
  return 0;
}
