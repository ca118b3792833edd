// StepProfiler: the session starts at the end of the last warm-up step, and each later step
// marks its end, so the session holds exactly the recorded steps.
#include "train/step_profiler.h"

#include "tensor/error.h"

namespace mdl::train {

StepProfiler::StepProfiler(int64_t steps) : steps_(steps) {}

bool StepProfiler::after_step(int64_t step) {
  if (!enabled()) return false;
  if (step == kWarmup) session_ = std::make_unique<profiler::Session>(profiler::Options{.record_shapes = true});
  else if (session_) session_->step();
  return session_ && session_->steps() == steps_;
}

std::string StepProfiler::finish(int64_t steps_run, const std::string& trace_path, bool write_trace, std::FILE* out) {
  MDL_CHECK(session_ && session_->steps() == steps_, "mdl-train: --profile ", steps_, " needs more than ",
            steps_ + kWarmup, " steps in the first epoch (", kWarmup, " to warm up); it has ", steps_run);
  session_->stop();
  std::string table = session_->table({.row_limit = 25});
  const std::string trace = trace_path.empty() ? "mdl-trace.json" : trace_path;
  if (write_trace) session_->export_chrome_trace(trace);
  if (out)
    std::fprintf(out,
                 "profiled %lld steps after %d warm-up steps:\n%s\ntrace written to %s (open it in "
                 "chrome://tracing or https://ui.perfetto.dev)\n",
                 (long long)session_->steps(), kWarmup, table.c_str(), trace.c_str());
  return table;
}

}  // namespace mdl::train
