// --profile N: the first epoch's first steps warm up (allocator, caches, first touch) unrecorded,
// then a profiler Session records N steps, after which training stops with the profiler's table
// printed and a Chrome trace written.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "profiler/session.h"

namespace mdl::train {

class StepProfiler {
 public:
  explicit StepProfiler(int64_t steps);  // 0: off, every call below a no-op
  bool enabled() const { return steps_ > 0; }
  // Called after each step (1-based); true once the N recorded steps are done.
  bool after_step(int64_t step);
  // Checks the epoch had enough steps, stops the session, writes the trace (when write_trace,
  // to trace_path or mdl-trace.json), prints the table and the trace's name to out (unless
  // null); returns the table. steps_run: the steps the epoch ran.
  std::string finish(int64_t steps_run, const std::string& trace_path, bool write_trace, std::FILE* out);

 private:
  static constexpr int kWarmup = 3;
  int64_t steps_;
  std::unique_ptr<profiler::Session> session_;
};

}  // namespace mdl::train
