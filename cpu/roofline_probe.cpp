// The CPU ceilings: each loop of cpu/roofline_loops.h is calibrated on one thread to run about
// options.seconds, then timed options.tries times on every compute thread at once; the best try is
// the ceiling.
#include "cpu/roofline_probe.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/gemm_amx.h"
#include "cpu/roofline_loops.h"
#include "tensor/error.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

using ChainFn = float (*)(int64_t rounds);
using TriadFn = void (*)(float* a, const float* b, const float* c, float s, int64_t n, int64_t passes);

struct Chains {
  const char* isa;
  bool bf16;
  ChainFn run;
  double round_flops;
  bool (*available)();
};
const Chains kChains[] = {
    {"avx2-fma", false, detail::fma_chains_avx2, detail::kFmaRoundFlopsAvx2, has_avx2_fma},
    {"avx512f", false, detail::fma_chains_avx512, detail::kFmaRoundFlopsAvx512, has_avx512f},
    {"avx512-bf16", true, detail::bf16_dot_chains_avx512, detail::kBf16RoundFlopsAvx512, has_avx512_bf16},
    {"amx-bf16", true, detail::amx_bf16_tile_products, detail::kAmxRoundFlops, amx_bf16_usable},
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds for work(thread, repeats) on every compute thread at once (each thread its own index),
// or on the calling thread alone as thread 0 (parallel_for runs chunk 0 there too).
template <class Work>
double timed(const Work& work, int64_t repeats, bool all_threads) {
  const double t0 = seconds_now();
  if (all_threads)
    parallel_for(0, get_num_threads(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) work(t, repeats);
    });
  else work(0, repeats);
  return seconds_now() - t0;
}

// The best of `tries` runs of work on every thread at once, as units of work per second (`per_repeat`:
// the work of one repeat on all threads together). The repeat count comes from the calling thread
// alone, where no thread waits for another at a barrier: it doubles until the time doubles with it
// (the work sets the time, not a wait for another program) and a call lasts half of `seconds`.
template <class Work>
double best_rate(const Work& work, double per_repeat, const ProbeOptions& o) {
  timed(work, 1, true);  // starts the threads
  int64_t repeats = 1;
  double t = timed(work, repeats, false);
  for (;;) {
    const double doubled = timed(work, 2 * repeats, false);
    repeats *= 2;
    const bool scales = doubled >= 1.6 * t && doubled <= 2.5 * t;
    t = doubled;
    if (scales && t >= o.seconds / 2) break;
    MDL_CHECK(repeats < (int64_t(1) << 50), "roofline: a probe loop does not slow down as it repeats");
  }
  double best = 0;
  for (int i = 0; i < std::max(o.tries, 1); ++i)
    best = std::max(best, per_repeat * double(repeats) / timed(work, repeats, true));
  return best;
}

TriadFn best_triad() {
  if (has_avx512f()) return detail::triad_avx512;
  if (has_avx2_fma()) return detail::triad_avx2;
  return detail::triad_plain;
}

struct AlignedFloats {
  explicit AlignedFloats(int64_t n) : p(static_cast<float*>(std::aligned_alloc(64, size_t((n + 15) / 16 * 64)))) {
    MDL_CHECK(p, "roofline: cannot allocate ", n * 4, " bytes for the triad");
  }
  ~AlignedFloats() { std::free(p); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  float* p;
};

int64_t cache_bytes(int name, int64_t fallback) {
  const long v = sysconf(name);
  return v > 0 ? int64_t(v) : fallback;
}

}  // namespace

int64_t last_level_cache_bytes() {
  const int64_t l3 = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 0);
  return l3 > 0 ? l3 : cache_bytes(_SC_LEVEL2_CACHE_SIZE, int64_t(32) << 20);
}

int64_t l2_cache_bytes() { return cache_bytes(_SC_LEVEL2_CACHE_SIZE, int64_t(1) << 20); }

double peak_gflops(const char* isa, const ProbeOptions& o) {
  for (const Chains& c : kChains) {
    if (std::strcmp(c.isa, isa) != 0) continue;
    MDL_CHECK(c.available(), "roofline: this CPU cannot run ", isa);
    std::vector<float> sink(static_cast<size_t>(get_num_threads()));
    auto work = [&](int64_t t, int64_t rounds) { sink[size_t(t)] = c.run(rounds); };
    return best_rate(work, c.round_flops * double(get_num_threads()), o) / 1e9;
  }
  MDL_FAIL("roofline: no peak loop for '", isa, "' (avx2-fma, avx512f, avx512-bf16, amx-bf16)");
}

double triad_gbs(int64_t array_bytes, bool per_thread, const ProbeOptions& o) {
  MDL_CHECK(array_bytes >= 64, "roofline: triad arrays of ", array_bytes, " bytes are too small");
  const int threads = get_num_threads();
  const int64_t n = array_bytes / 4, total = per_thread ? n * threads : n;
  AlignedFloats a(total), b(total), c(total);
  const TriadFn triad = best_triad();
  // Each thread's slice: its own arrays (per_thread) or its share of the shared ones, first
  // touched by the thread that runs the triad on it.
  auto slice = [&](int64_t t, int64_t& begin, int64_t& count) {
    const int64_t chunk = per_thread ? n : (n + threads - 1) / threads;
    begin = std::min(total, t * chunk);
    count = std::min(total, begin + chunk) - begin;
  };
  timed(
      [&](int64_t t, int64_t) {
        int64_t begin, count;
        slice(t, begin, count);
        for (int64_t i = begin; i < begin + count; ++i) a.p[i] = 0, b.p[i] = 1, c.p[i] = 2;
      },
      1, true);
  auto work = [&](int64_t t, int64_t passes) {
    int64_t begin, count;
    slice(t, begin, count);
    triad(a.p + begin, b.p + begin, c.p + begin, 0.5f, count, passes);
  };
  return best_rate(work, 3.0 * 4.0 * double(total), o) / 1e9;
}

std::vector<profiler::Rate> f32_fma_peaks(const ProbeOptions& o) {
  std::vector<profiler::Rate> peaks;
  for (const Chains& chains : kChains)
    if (!chains.bf16 && chains.available()) peaks.push_back({chains.isa, peak_gflops(chains.isa, o)});
  return peaks;
}

profiler::CpuCeilings measure_cpu_ceilings(const ProbeOptions& o) {
  profiler::CpuCeilings c;
  c.model = cpu_model_name();
  c.threads = get_num_threads();
  if (has_avx2_fma()) c.flags.insert(c.flags.end(), {"avx2", "fma"});
  if (has_avx512f()) c.flags.push_back("avx512f");
  if (has_avx512_bf16()) c.flags.push_back("avx512bf16");
  if (amx_bf16_usable()) c.flags.push_back("amx-bf16");
  c.f32_fma = f32_fma_peaks(o);
  for (const Chains& chains : kChains)
    if (chains.bf16 && chains.available()) c.bf16_dot.push_back({chains.isa, peak_gflops(chains.isa, o)});
  c.llc_bytes = last_level_cache_bytes();
  c.l2_bytes = l2_cache_bytes();
  // Three arrays of 4/3 of the last-level cache each (at most 128 MiB each); three filling half of L2.
  c.memory_gbs = triad_gbs(profiler::memory_triad_bytes(c.llc_bytes), false, o);
  c.l2_gbs = triad_gbs(c.l2_bytes / 6 / 64 * 64, true, o);
  return c;
}

}  // namespace mdl::cpu
