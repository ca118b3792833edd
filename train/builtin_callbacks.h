// The built-in callbacks: a progress line and a printed line per epoch, a CSV log, a training
// checkpoint each epoch, the best weights checkpointed, early stopping, ReduceLROnPlateau, and a
// stop at a target accuracy that records when the target was reached. (ProfileSteps is in
// profile_steps.h.) Each monitored metric is named as in
// train/callback.h ("val_loss", "val_accuracy", ...); a val_ metric needs a validation loader.
#pragma once
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "io/safetensors.h"
#include "optim/schedulers.h"
#include "train/callback.h"
#include "train/epoch_log.h"
#include "train/progress.h"

namespace mdl::train {

// The progress line during each epoch (redrawn in place when terminal, else a line every tenth
// of the epoch), one line per epoch, and a line when a callback stopped the run. It asks for the
// running sums only on the steps it draws.
class ProgressPrinter : public Callback {
 public:
  explicit ProgressPrinter(std::FILE* out = stdout, bool terminal = false);
  void on_train_begin(TrainContext& c) override;
  void on_epoch_begin(TrainContext& c) override;
  bool needs_step_totals(const TrainContext& c) override;
  void on_step_end(TrainContext& c) override;
  void on_epoch_end(TrainContext& c, const EpochRecord& r) override;
  void on_train_end(TrainContext& c) override;

 private:
  void end_line();

  std::FILE* out_;
  bool terminal_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<EpochLog> log_;
};

// One CSV row per epoch, the columns of mdl-train --log. Appending for a fit that continues a run
// (first_epoch past 1: a resumed one), it first drops the rows of epochs from first_epoch on, which
// a run killed after logging an epoch and before checkpointing it left (train/csv_log.h).
class CsvLogger : public Callback {
 public:
  explicit CsvLogger(std::string path, bool append = false);
  void on_train_begin(TrainContext& c) override;
  void on_epoch_end(TrainContext& c, const EpochRecord& r) override;

 private:
  std::string path_;
  bool append_;
  std::unique_ptr<EpochLog> log_;
};

// The training checkpoint (train/checkpoint.h) written at each epoch's end, after every other
// callback's on_epoch_end, crash-consistently: weights, optimizer and scaler state, the epoch,
// `tags` and the callbacks' state (TrainContext::callback_state). resume_checkpoint() reads it back.
class SaveCheckpoint : public Callback {
 public:
  explicit SaveCheckpoint(std::string path, io::Metadata tags = {});
  void on_epoch_checkpoint(TrainContext& c, const EpochRecord& r) override;

 private:
  std::string path_;
  io::Metadata tags_;
};

// When is a metric better than the best so far: by more than min_delta, in the mode's direction.
// NaN is never better.
class BestTracker {
 public:
  BestTracker(const std::string& monitor, Mode mode, double min_delta, const char* who);
  void reset();
  bool improves(double value) const;
  void set(double value, int64_t epoch) { best_ = value, best_epoch_ = epoch; }
  double best() const { return best_; }
  int64_t best_epoch() const { return best_epoch_; }  // 0 before any
  const std::string& monitor() const { return monitor_; }
  void check_available(const TrainContext& c, const char* who) const;

 private:
  std::string monitor_;
  bool max_;
  double min_delta_, best_ = NAN;
  int64_t best_epoch_ = 0;
};

// Saves the model's state_dict (safetensors, written atomically) each time the monitored metric
// improves; the file's metadata names the epoch, the metric and its value. A save removes the
// temporary files killed writers of the same path left.
class CheckpointBest : public Callback {
 public:
  explicit CheckpointBest(std::string path, std::string monitor = "val_loss", Mode mode = Mode::Auto);
  void on_train_begin(TrainContext& c) override;
  void on_epoch_end(TrainContext& c, const EpochRecord& r) override;
  int64_t saves() const { return saves_; }
  int64_t best_epoch() const { return best_.best_epoch(); }
  double best() const { return best_.best(); }

 private:
  std::string path_;
  BestTracker best_;
  int64_t saves_ = 0;
};

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  int64_t patience = 0;  // epochs without improvement before stopping (Keras's meaning)
  double min_delta = 0;  // a smaller change is no improvement
  Mode mode = Mode::Auto;
  bool restore_best_weights = false;  // at the run's end, the weights of the best epoch
};

// The best value, its epoch and the epochs waited since are kept in TrainContext::callback_state,
// so a resumed run stops where the straight one would; the best weights are not (a resumed run
// restores only those of a best epoch after the resume: CheckpointBest keeps them in a file).
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(TrainContext& c) override;
  void on_epoch_end(TrainContext& c, const EpochRecord& r) override;
  void on_train_end(TrainContext& c) override;
  int64_t stopped_epoch() const { return stopped_epoch_; }  // 0 when it did not stop the run
  int64_t best_epoch() const { return best_.best_epoch(); }
  bool restored() const { return restored_; }

 private:
  EarlyStoppingOptions o_;
  BestTracker best_;
  int64_t wait_ = 0, stopped_epoch_ = 0, last_epoch_ = 0;
  NamedTensors best_weights_;
  bool restored_ = false;
};

// optim::ReduceLROnPlateau stepped with the monitored metric at each epoch's end; `mode`
// decides options.mode_max. Its best value and counts are kept in TrainContext::callback_state
// (the lowered lr is the optimizer's own state), so a resumed run lowers it where the straight
// one would.
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(std::string monitor = "val_loss", optim::ReduceLROnPlateauOptions options = {},
                             Mode mode = Mode::Auto);
  void on_train_begin(TrainContext& c) override;
  void on_epoch_end(TrainContext& c, const EpochRecord& r) override;
  int64_t reductions() const { return reductions_; }

 private:
  std::string monitor_;
  optim::ReduceLROnPlateauOptions options_;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau_;
  int64_t reductions_ = 0;
};

// Stops the run once the monitored accuracy reaches `target`, recording the epoch and the wall
// time from the run's start (training and validation) at which it did.
class TimeToTarget : public Callback {
 public:
  explicit TimeToTarget(double target, std::string monitor = "val_accuracy");
  void on_train_begin(TrainContext& c) override;
  void on_epoch_end(TrainContext& c, const EpochRecord& r) override;
  bool reached() const { return epoch_ > 0; }
  int64_t epoch() const { return epoch_; }     // 0 when not reached
  double seconds() const { return seconds_; }  // NaN when not reached
  double target() const { return target_; }

 private:
  double target_;
  std::string monitor_;
  int64_t epoch_ = 0;
  double seconds_ = NAN;
};

}  // namespace mdl::train
