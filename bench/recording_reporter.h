// What every suite's main() does, once: run the registered benchmarks with Google Benchmark's
// console table, and keep each run's figures by name so the suite can print its ratios after the
// table. A run is named as registered ("matmul/1024/f16"; with Arg(): "profile_step/2"); with
// repetitions its figures are their median, else its first run's.
//
//   bench::RecordingReporter reporter;
//   if (!bench::run_benchmarks(argc, argv, reporter)) return 1;
//   if (const bench::RunResult* r = reporter.find("matmul/1024/f16")) ... r->real ... r->counter("GFLOP/s")
#pragma once
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace bench {

struct RunResult {
  double real = 0, cpu = 0;                // per iteration, in the run's time unit
  std::map<std::string, double> counters;  // as reported (rates in their base unit: GFLOP/s is 1e9)
  // A counter's value, or -1 when the run has none; scale: e.g. 1e-9 for GFLOP/s.
  double counter(const std::string& name, double scale = 1.0) const {
    auto it = counters.find(name);
    return it == counters.end() ? -1.0 : it->second * scale;
  }
};

class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if ((r.run_type != Run::RT_Iteration && !median) || r.error_occurred) continue;
      std::string name = r.run_name.function_name;
      if (!r.run_name.args.empty()) name += "/" + r.run_name.args;
      if (!median && results_.count(name)) continue;  // a repetition: the median comes later
      RunResult& out = results_[name];
      out.real = r.GetAdjustedRealTime(), out.cpu = r.GetAdjustedCPUTime();
      for (const auto& [key, c] : r.counters) out.counters[key] = c.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Null when the run did not happen (filtered out, skipped, failed).
  const RunResult* find(const std::string& name) const {
    auto it = results_.find(name);
    return it == results_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, RunResult> results_;
};

// Initialize, check the flags, run every registered benchmark through `reporter`, Shutdown.
// False when a flag was not recognised (the caller returns 1).
inline bool run_benchmarks(int& argc, char** argv, benchmark::BenchmarkReporter& reporter) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return false;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return true;
}

inline bool run_benchmarks(int& argc, char** argv) {
  RecordingReporter reporter;
  return run_benchmarks(argc, argv, reporter);
}

}  // namespace bench
