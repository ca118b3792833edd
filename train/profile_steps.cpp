// ProfileSteps: the session starts at the end of the last warm-up step, and each later step
// marks its end, so the session holds exactly the recorded steps.
#include "train/profile_steps.h"

#include "cuda/api.h"
#include "switches/list/toggles.h"
#include "tensor/error.h"

namespace mdl::train {

ProfileSteps::ProfileSteps(int64_t steps, ProfileStepsOptions options) : steps_(steps), o_(std::move(options)) {
  MDL_CHECK(steps_ > 0, "ProfileSteps: the steps to record must be positive, got ", steps_);
  MDL_CHECK(o_.ceilings || o_.sort_by != profiler::SortBy::Headroom,
            "ProfileSteps: sorting by headroom needs the roofline's ceilings");
}

void ProfileSteps::on_step_end(TrainContext& c) {
  if (c.step == kWarmup && !session_)
    session_ = std::make_unique<profiler::Session>(profiler::Options{.record_shapes = true});
  else if (session_) session_->step();
  if (session_ && session_->steps() == steps_) {
    c.stop_now("profiled " + std::to_string(steps_) + " steps");
    return;
  }
  MDL_CHECK(c.step < c.steps_per_epoch, "ProfileSteps: recording ", steps_, " steps needs at least ", steps_ + kWarmup,
            " steps in the first epoch (", kWarmup, " to warm up); it has ", c.step);
}

profiler::RooflineOptions ProfileSteps::roofline() const {
  return {.ceilings = o_.ceilings ? &*o_.ceilings : nullptr,
          .gpu_tf32 = toggles::allow_tf32(),
          .gpu_conv_tf32 = toggles::cudnn_allow_tf32()};
}

void ProfileSteps::on_train_end(TrainContext&) {
  if (!session_ || session_->steps() != steps_ || !table_.empty()) return;
  session_->stop();
  table_ = session_->table({.sort_by = o_.sort_by, .row_limit = 25, .roofline = roofline()});
  if (!o_.trace_path.empty()) session_->export_chrome_trace(o_.trace_path, roofline());
  if (o_.out)
    std::fprintf(o_.out,
                 "profiled %lld steps after %d warm-up steps:\n%s\ntrace written to %s (open it in "
                 "chrome://tracing or https://ui.perfetto.dev)\n",
                 (long long)session_->steps(), kWarmup, table_.c_str(),
                 o_.trace_path.empty() ? "(none)" : o_.trace_path.c_str());
}

}  // namespace mdl::train
