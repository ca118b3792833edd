// EpochMeter: rates are over the epoch's wall time so far (floored at 1 ns); loss and accuracy
// are means over the samples (or tokens) seen.
#include "train/epoch_meter.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mdl::train {

double running_accuracy(const EpochTotals& totals) {
  return totals.classified > 0 ? double(totals.correct) / double(totals.classified) : NAN;
}

EpochMeter::EpochMeter(const data::DataLoader& loader, int64_t epoch, int world)
    : loader_(loader), epoch_(epoch), world_(world), before_(loader.stats()), start_(std::chrono::steady_clock::now()) {
}

double EpochMeter::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int64_t EpochMeter::samples() const { return (loader_.stats().samples - before_.samples) * world_; }

double EpochMeter::wait_seconds() const { return loader_.stats().wait_seconds - before_.wait_seconds; }

EpochRecord EpochMeter::record(const EpochTotals& totals, DataParallel& dp) const {
  EpochRecord r;
  r.epoch = epoch_;
  r.seconds = seconds();
  const data::LoaderStats after = loader_.stats();
  r.wait_fraction = (after.wait_seconds - before_.wait_seconds) / std::max(r.seconds, 1e-9);
  std::vector<double> sums = {totals.loss_sum, double(totals.correct), double(totals.seen),
                              double(after.samples - before_.samples), double(totals.classified)};
  dp.sum(sums);  // the whole job's figures, not one shard's
  r.samples_per_second = sums[3] / std::max(r.seconds, 1e-9);
  r.train_loss = sums[0] / std::max(sums[2], 1.0);
  r.train_accuracy = sums[4] > 0 ? sums[1] / sums[4] : NAN;
  return r;
}

}  // namespace mdl::train
