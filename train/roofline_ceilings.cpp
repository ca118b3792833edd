// measure_ceilings: the CPU probes, then on a GPU the rates of 8192^3 matmuls (f16, bf16, f32 with
// and without TF32) and of a 1 GiB device-to-device copy, each the best of a few timed tries after
// one untimed call; the TF32 switch is put back as it was.
#include "train/roofline_ceilings.h"

#include <chrono>
#include <ctime>
#include <filesystem>

#include "cpu/cpu_features.h"
#include "cpu/roofline_probe.h"
#include "cuda/api.h"
#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "switches/list/toggles.h"
#include "tensor/parallel.h"

namespace mdl::train {

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The best rate (work per second) of `tries` timed calls of run() after one untimed call.
template <class Run>
double best_gpu_rate(const Run& run, double work, int tries) {
  run();
  cuda::synchronize();
  double best = 0;
  for (int i = 0; i < std::max(tries, 1); ++i) {
    const double t0 = seconds_now();
    run();
    cuda::synchronize();
    best = std::max(best, work / (seconds_now() - t0));
  }
  return best;
}

profiler::GpuCeilings measure_gpu(const MeasureOptions& o) {
  profiler::GpuCeilings g;
  const Device d = Device::cuda(0);
  g.device = d.str();
  constexpr int64_t n = 8192;
  const double flops = 2.0 * double(n) * double(n) * double(n);
  auto matmul_rate = [&](DType t, bool tf32) {
    const bool was = toggles::allow_tf32();
    toggles::set_allow_tf32(tf32);
    const Tensor a = full({n, n}, 0.01, TensorOptions(t, d)), b = full({n, n}, 0.01, TensorOptions(t, d));
    const double rate = best_gpu_rate([&] { native::matmul(a, b); }, flops, o.tries) / 1e9;
    toggles::set_allow_tf32(was);
    return rate;
  };
  g.f16_tensor = matmul_rate(kF16, false);
  g.bf16_tensor = matmul_rate(kBF16, false);
  g.tf32_tensor = matmul_rate(kF32, true);
  g.f32 = matmul_rate(kF32, false);
  constexpr int64_t copy_floats = int64_t(1) << 28;  // 1 GiB
  const Tensor src = full({copy_floats}, 1.0, TensorOptions(kF32, d)),
               dst = full({copy_floats}, 0.0, TensorOptions(kF32, d));
  g.memory_gbs = best_gpu_rate([&] { native::copy_(dst, src); }, 2.0 * 4.0 * double(copy_floats), o.tries) / 1e9;
  return g;
}

}  // namespace

bool gpu_present() { return cuda::is_available(); }

profiler::Ceilings measure_ceilings(const MeasureOptions& o) {
  const double t0 = seconds_now();
  profiler::Ceilings c;
  c.date = utc_now();
  c.cpu = cpu::measure_cpu_ceilings({.seconds = o.seconds, .tries = o.tries});
  if (o.gpu && gpu_present()) c.gpu = measure_gpu(o);
  c.measure_ms = int64_t((seconds_now() - t0) * 1000);
  return c;
}

profiler::Ceilings checked_ceilings(const std::string& path, bool gpu) {
  profiler::Ceilings c = profiler::load_ceilings(path);
  profiler::check_ceilings_match(c, path, cpu::cpu_model_name(), get_num_threads(), gpu);
  return c;
}

profiler::Ceilings ceilings_for_this_machine(const std::string& path, bool refresh, bool* measured,
                                             const MeasureOptions& options) {
  const bool exists = std::filesystem::exists(path);
  if (measured) *measured = refresh || !exists;
  if (refresh || !exists) {
    profiler::Ceilings c = measure_ceilings(options);
    profiler::save_ceilings(c, path);
    return c;
  }
  return checked_ceilings(path, options.gpu && gpu_present());
}

}  // namespace mdl::train
