// GPU kernel benchmarks timed on the device: a start and a stop CUDA event on mdl's stream around a
// batch of back-to-back calls (the profiler's event timer, cuda/runtime/device_timer.cpp), so the
// figure is the GPU's time per call, free of the host's per-call synchronize and its device error
// read-back. The host clock around the same batch is reported beside it as the wall_us counter.
#pragma once
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "cuda/api.h"
#include "profiler/cuda_timer.h"
#include "tensor/device.h"

namespace bench {

struct BatchTime {
  bool valid = false;
  double gpu_s = 0;   // per call: between the start and the stop event
  double wall_s = 0;  // per call: host clock from before the start event until the stop event completed
};

// Runs call() k times back to back (nothing waits in between) between a start and a stop event on
// mdl's stream, then waits for the stop event. The timer must not be in use by a profiler session.
template <class F>
BatchTime time_batch(mdl::profiler::DeviceTimer& timer, F& call, int64_t k) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t h = timer.start(mdl::Device::cuda());
  for (int64_t i = 0; i < k; ++i) call();
  timer.stop(h);
  timer.synchronize();  // the stop event is the last work on mdl's stream
  const auto t1 = std::chrono::steady_clock::now();
  const mdl::profiler::DeviceTimer::Timing t = timer.resolve(h);
  timer.reset();  // the two events go back to the timer's pool
  const double n = double(k);
  return {.valid = t.valid,
          .gpu_s = double(t.dur_ns) * 1e-9 / n,
          .wall_s = std::chrono::duration<double>(t1 - t0).count() / n};
}

// The timing loop of a kernel benchmark registered with ->UseManualTime(): one Google Benchmark
// iteration is one call. The batch size k doubles from 1 until a batch holds min_batch_s of GPU
// time, so that the events' resolution (about 0.5 us) and the stop event's wait are small against
// it; then each batch of k calls is one KeepRunningBatch step whose GPU time is the iteration
// time. Rate counters with Counter::kIsRate divide by that GPU time. Counters: wall_us (host time
// per call over the same batches) and calls/batch (k). A benchmark registered without
// ->UseManualTime() would silently report the host's time instead. timer: the CUDA backend's unless
// given (a fake one times the loop without a GPU).
template <class F>
void run_event_timed(benchmark::State& st, F&& call, double min_batch_s = 1e-3,
                     mdl::profiler::DeviceTimer* timer = mdl::profiler::cuda_device_timer()) {
  if (!timer) {
    st.SkipWithError("no CUDA event timer (no GPU)");
    return;
  }
  constexpr int64_t kMaxBatch = int64_t(1) << 20;
  int64_t k = 1;
  for (;;) {
    const BatchTime b = time_batch(*timer, call, k);
    if (!b.valid) {
      st.SkipWithError("the CUDA events did not resolve");
      return;
    }
    if (b.gpu_s * double(k) >= min_batch_s || k >= kMaxBatch) break;
    k *= 2;
  }
  mdl::cuda::check_errors();
  double wall_s = 0;
  while (st.KeepRunningBatch(k)) {
    const BatchTime b = time_batch(*timer, call, k);
    if (!b.valid) {
      st.SkipWithError("the CUDA events did not resolve");
      break;
    }
    st.SetIterationTime(b.gpu_s * double(k));
    wall_s += b.wall_s * double(k);
    // A kernel's error surfaces at the batch that raised it; the read-back is outside the events.
    mdl::cuda::check_errors();
  }
  if (st.iterations() > 0) st.counters["wall_us"] = 1e6 * wall_s / double(st.iterations());
  st.counters["calls/batch"] = double(k);
}

}  // namespace bench
