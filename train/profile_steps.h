// ProfileSteps(N): a callback that profiles N training steps. The first epoch's first steps warm
// up (allocator, caches, first touch) unrecorded; then a profiler Session records N steps, after
// which the run stops (the epoch is neither finished nor validated), the profiler's table is
// printed and a Chrome trace written. mdl-train --profile N.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "profiler/session.h"
#include "train/callback.h"

namespace mdl::train {

struct ProfileStepsOptions {
  std::string trace_path = "mdl-trace.json";  // empty: no trace written
  std::FILE* out = stdout;                    // the table and the trace's name; null: not printed
};

class ProfileSteps : public Callback {
 public:
  explicit ProfileSteps(int64_t steps, ProfileStepsOptions options = {});
  void on_step_end(TrainContext& c) override;
  void on_train_end(TrainContext& c) override;
  const std::string& table() const { return table_; }  // once the steps are recorded

  static constexpr int kWarmup = 3;

 private:
  int64_t steps_;
  ProfileStepsOptions o_;
  std::unique_ptr<profiler::Session> session_;
  std::string table_;
};

}  // namespace mdl::train
