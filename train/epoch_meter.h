// The figures of one training epoch: time from its start, the loader's data wait and samples,
// and the running loss and accuracy. As steps end it draws the progress line; at the epoch's end
// it gives the EpochRecord's training figures, summed over the ranks under --dist.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "data/loader.h"
#include "train/distributed.h"
#include "train/progress.h"
#include "train/train_step.h"
#include "train/epoch_record.h"

namespace mdl::train {

// correct / classified; NaN when no batch was a classification (a loss without classes).
double running_accuracy(const EpochTotals& totals);

class EpochMeter {
 public:
  // Start it once the loader's epoch is set. out null: no progress line. epoch is 1-based.
  EpochMeter(const data::DataLoader& loader, std::FILE* out, bool terminal, int64_t epoch, int64_t epochs, int world);
  void show_progress(int64_t step, const EpochTotals& totals);
  bool progress_due(int64_t step) const { return show_ && progress_.due(step); }
  void end_progress();  // ends a redrawn line
  // epoch, seconds, wait_fraction, samples_per_second, train_loss, train_accuracy; the rest is
  // left to the caller.
  EpochRecord record(const EpochTotals& totals, DataParallel& dp) const;

 private:
  double elapsed() const;

  const data::DataLoader& loader_;
  const bool show_;
  const int64_t epoch_;
  const int world_;
  const data::LoaderStats before_;
  Progress progress_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace mdl::train
