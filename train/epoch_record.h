// The figures of one finished epoch, as mdl-train prints and logs them and train::Trainer's
// fit returns them.
#pragma once
#include <cmath>
#include <cstdint>

namespace mdl::train {

struct EpochRecord {
  int64_t epoch = 0;                                              // 1-based
  double train_loss = 0, train_accuracy = 0;                      // running means over the epoch
  double val_loss = NAN, val_accuracy = NAN, val_macro_f1 = NAN;  // NaN without a test split
  double seconds = 0;                                             // the training part of the epoch
  double wait_fraction = 0;                                       // of those seconds, waiting for data
  double samples_per_second = 0;
  double lr = 0;              // at the epoch's end
  int64_t skipped_steps = 0;  // GradScaler skips so far
  int64_t peak_bytes = 0;     // the device allocator's high-water mark in the epoch
};

}  // namespace mdl::train
