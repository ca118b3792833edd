// ProfileSteps(N): a callback that profiles N training steps. The first epoch's first steps warm
// up (allocator, caches, first touch) unrecorded; then a profiler Session records N steps, after
// which the run stops (the epoch is neither finished nor validated), the profiler's table is
// printed and a Chrome trace written; given the machine's ceilings, both carry the roofline
// columns. mdl-train --profile N.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "profiler/session.h"
#include "train/callback.h"

namespace mdl::train {

struct ProfileStepsOptions {
  std::string trace_path = "mdl-trace.json";     // empty: no trace written
  std::FILE* out = stdout;                       // the table and the trace's name; null: not printed
  std::optional<profiler::Ceilings> ceilings{};  // the roofline's (train/roofline_ceilings.h); none: no roofline
  profiler::SortBy sort_by = profiler::SortBy::Total;
};

class ProfileSteps : public Callback {
 public:
  explicit ProfileSteps(int64_t steps, ProfileStepsOptions options = {});
  void on_step_end(TrainContext& c) override;
  void on_train_end(TrainContext& c) override;
  const std::string& table() const { return table_; }  // once the steps are recorded
  // The recorded session once stopped (null before), and the roofline it is held to.
  const profiler::Session* session() const { return table_.empty() ? nullptr : session_.get(); }
  profiler::RooflineOptions roofline() const;

  static constexpr int kWarmup = 3;

 private:
  int64_t steps_;
  ProfileStepsOptions o_;
  std::unique_ptr<profiler::Session> session_;
  std::string table_;
};

}  // namespace mdl::train
