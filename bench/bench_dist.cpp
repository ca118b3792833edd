// Data parallel over MPI, run as `mpirun -np 2 build/bench/bench_dist` (make bench-dist):
// all_reduce of 1 MB to 256 MB of f32 (algorithm bandwidth = bytes / time; bus bandwidth =
// algbw x 2 (n - 1) / n, as nccl-tests define them; printed in bytes/s, so 1.2G/s is 1.2 GB/s), and a SimpleCNN training step (batch 64 per
// rank, SGD) on rank 0 alone with 2 threads and with 1 thread, then on both ranks with DDP and 1
// thread each. The closing table gives the scaling efficiency: samples/s on 2 ranks / (2 x
// samples/s on 1 rank, 1 thread). Iteration counts are fixed so the ranks stay in lockstep;
// rank 0 alone reports.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/mpi_group.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "optim/sgd.h"
#include "ops/native/factory.h"
#include "tensor/parallel.h"

using namespace mdl;

namespace {

dist::MpiProcessGroup* g_pg = nullptr;
std::map<std::string, double> g_samples_per_second;  // rank 0's measurements, for the closing table
constexpr int64_t kBatch = 64;

void BM_AllReduce(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  Tensor t = ones({bytes / 4});
  g_pg->all_reduce(t);  // warm-up: connections and buffers
  for (auto _ : state) g_pg->all_reduce(t);
  const double n = g_pg->world_size();
  state.counters["algbw"] = benchmark::Counter(double(bytes), benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.counters["busbw"] = benchmark::Counter(
      double(bytes) * 2 * (n - 1) / n, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::to_string(int(n)) + " ranks");
}

// mode 0: rank 0 alone, 2 threads; 1: rank 0 alone, 1 thread; 2: every rank, DDP, 1 thread each.
void BM_SimpleCnnStep(benchmark::State& state) {
  const int mode = int(state.range(0));
  const bool all_ranks = mode == 2;
  const bool works = all_ranks || g_pg->rank() == 0;
  set_num_threads(mode == 0 ? 2 : 1);
  manual_seed(0);
  auto model = nn::models::SimpleCNN(1, 10, 28);
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  if (all_ranks) ddp = std::make_unique<dist::DistributedDataParallel>(model, *g_pg);
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  Generator g(1 + uint64_t(g_pg->rank()));
  const Tensor x = randn({kBatch, 1, 28, 28}, {}, &g), y = randint(0, 10, {kBatch}, kI64, &g);
  auto step = [&] {
    opt.zero_grad();
    nn::functional::cross_entropy(ddp ? ddp->forward(x) : (*model)(x), y).backward();
    opt.step();
  };
  if (works) step();  // warm-up
  g_pg->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  int64_t steps = 0;
  for (auto _ : state) {
    if (works) step();
    ++steps;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_pg->barrier();  // rank 1 waits here (sleeping) while rank 0 trains alone
  const double samples = double(kBatch) * (all_ranks ? g_pg->world_size() : 1);
  state.counters["samples/s"] = benchmark::Counter(samples, benchmark::Counter::kIsIterationInvariantRate);
  const char* names[] = {"1 rank, 2 threads", "1 rank, 1 thread", "2 ranks (DDP), 1 thread each"};
  state.SetLabel(names[mode]);
  g_samples_per_second[names[mode]] = samples * double(steps) / seconds;
  set_num_threads(2);
}

BENCHMARK(BM_AllReduce)
    ->ArgName("MB")
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Iterations(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimpleCnnStep)
    ->ArgName("mode")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(15)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  dist::MpiProcessGroup pg({.timeout_seconds = 120});
  g_pg = &pg;
  // Only rank 0 writes --benchmark_out; the others run silently in lockstep.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    if (pg.rank() == 0 || std::strncmp(argv[i], "--benchmark_out", 15) != 0) args.push_back(argv[i]);
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  if (pg.rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    struct Silent : benchmark::BenchmarkReporter {
      bool ReportContext(const Context&) override { return true; }
      void ReportRuns(const std::vector<Run>&) override {}
    } silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  if (pg.rank() == 0 && g_samples_per_second.size() == 3) {
    const double one = g_samples_per_second["1 rank, 1 thread"],
                 two_threads = g_samples_per_second["1 rank, 2 threads"];
    const double ddp = g_samples_per_second["2 ranks (DDP), 1 thread each"];
    std::printf("\nSimpleCNN training, batch %lld per rank, %d ranks:\n", (long long)kBatch, pg.world_size());
    for (auto& [k, v] : g_samples_per_second) std::printf("  %-30s %8.1f samples/s\n", k.c_str(), v);
    std::printf("  scaling efficiency (2 ranks vs 2 x 1 rank, 1 thread each): %.2f\n", ddp / (2 * one));
    std::printf("  2 ranks x 1 thread vs 1 rank x 2 threads:                  %.2fx\n", ddp / two_threads);
  }
  benchmark::Shutdown();
  return 0;
}
