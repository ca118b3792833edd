// run_training: the whole of mdl-train as a function, so the study driver and tests call it
// in-process. Builds data, model, optimizer and schedule from TrainOptions, and a train::Trainer
// with the switches on (autocast + GradScaler, gradient accumulation, L2, clipping, cache,
// prefetch, workers, pinned memory, channels-last, CUDA Graphs, data parallel) and the callbacks
// the options ask for (progress, CSV log, checkpoints, profiling, --early-stop, --save-best,
// --plateau, --target-accuracy); resumes a checkpoint, then calls Trainer::fit.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "train/epoch_record.h"
#include "tools/mdl_train/evaluate_weights.h"
#include "tools/mdl_train/options.h"

namespace mdl::train {

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
  int rank = 0;                 // with --dist: this process's rank (rank 0 alone reports)
  std::string stop_reason;      // why a callback (--early-stop, --target-accuracy) stopped the run early
  int64_t target_epoch = 0;     // with --target-accuracy: the epoch that reached it (0: not reached)
  double target_seconds = NAN;  // and the wall time from the run's start to that epoch's end
};

// Prints progress and per-epoch lines to `out` (nullptr: silent). Throws mdl::Error (UsageError
// for inconsistent options) on failures, naming the file or option.
TrainReport run_training(const TrainOptions& options, std::FILE* out = stdout);

}  // namespace mdl::train
