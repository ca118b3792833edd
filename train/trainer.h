// run_training: the whole of mdl-train as a function, so the study driver and tests call it
// in-process. Builds data, model, optimizer and schedule from TrainOptions, trains with the
// switches on (autocast + GradScaler, gradient accumulation, L2, clipping, cache, prefetch,
// workers, pinned memory), validates each epoch, logs CSV, saves and resumes checkpoints.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "train/evaluate.h"
#include "train/options.h"

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

struct TrainReport {
  std::vector<EpochRecord> epochs;
  double total_seconds = 0;
  int64_t parameters = 0;
  std::string model_summary;  // nn::summary of the model on one batch
  std::string confusion;      // the last validation's confusion matrix, printed
  std::string data_description;
  std::string profile_table;  // with --profile: the profiler's table
  bool evaluated = false;     // with --evaluate: the run evaluated, and trained nothing
  Evaluation evaluation;
  int rank = 0;  // with --dist: this process's rank (rank 0 alone reports)
};

// Prints progress and per-epoch lines to `out` (nullptr: silent). Throws mdl::Error (UsageError
// for inconsistent options) on failures, naming the file or option.
TrainReport run_training(const TrainOptions& options, std::FILE* out = stdout);

}  // namespace mdl::train
