// The figures of one training epoch as it runs: wall time from its start, and the loader's
// samples and data wait since then. At the epoch's end it gives the EpochRecord's training
// figures, summed over the ranks under data parallel.
#pragma once
#include <chrono>
#include <cstdint>

#include "data/loader.h"
#include "train/data_parallel.h"
#include "train/epoch_record.h"
#include "train/train_step.h"

namespace mdl::train {

// correct / classified; NaN when no batch was a classification (a loss without classes).
double running_accuracy(const EpochTotals& totals);

class EpochMeter {
 public:
  // Start it once the loader's epoch is set. epoch is 1-based; world: the ranks training.
  EpochMeter(const data::DataLoader& loader, int64_t epoch, int world);
  double seconds() const;       // since the epoch began
  int64_t samples() const;      // loaded since the epoch began, over all ranks (this rank's times world)
  double wait_seconds() const;  // of seconds(), this rank's time waiting for data
  // epoch, seconds, wait_fraction, samples_per_second, train_loss, train_accuracy; the rest is
  // left to the caller.
  EpochRecord record(const EpochTotals& totals, DataParallel& dp) const;

 private:
  const data::DataLoader& loader_;
  const int64_t epoch_;
  const int world_;
  const data::LoaderStats before_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace mdl::train
