// Benchmark pairs registered under their optimization switch's name (switches/switches.h):
// <switch>/off/<case> against <switch>/on/<case>, so the names follow the list and bench/summary.py
// finds each pair from it. The first name asked for also publishes the list in the suite's JSON
// output, as the context entry "mdl_switches".
#pragma once
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <string_view>

#include "switches/switches.h"

namespace bench {

// Whether the suite was asked only to list its benchmarks (--benchmark_list_tests): suites register
// their GPU pairs then even without a GPU, so that bench/check_cases.py sees every name.
inline bool listing_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_list_tests", 22) == 0 && std::strstr(argv[i], "false") == nullptr)
      return true;
  return false;
}

inline void publish_switches() {
  static const bool published = [] {
    benchmark::AddCustomContext("mdl_switches", mdl::switches::to_json());
    return true;
  }();
  (void)published;
}

// One side of `name`'s pair; throws mdl::Error for a name the list does not hold.
inline std::string switch_benchmark(std::string_view name, bool on, std::string_view case_name = {}) {
  publish_switches();
  return mdl::switches::bench_name(name, on, case_name);
}

// Registers fn(state, on) as switch_benchmark(name, on, case_name); chain ->Unit() etc. as usual.
template <class Fn>
benchmark::internal::Benchmark* register_switch(std::string_view name, bool on, std::string_view case_name, Fn fn) {
  return benchmark::RegisterBenchmark(switch_benchmark(name, on, case_name).c_str(),
                                      [fn, on](benchmark::State& s) { fn(s, on); });
}

}  // namespace bench
