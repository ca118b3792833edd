// Callbacks, as Keras has them: objects train::Trainer calls at its fixed points (the run's
// begin and end, each epoch's begin and end, each step's end). They read the run's state in a
// TrainContext and may stop the run. mdl-train's printing, logging, checkpoints and profiling
// are callbacks too.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/epoch_record.h"
#include "train/train_step.h"

namespace mdl::train {

// What a callback sees. The loop fills it in; a callback changes nothing in it but `stop`
// (through request_stop) and, through the pointers, the model's weights or the optimizer's lr.
struct TrainContext {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  amp::GradScaler* scaler = nullptr;
  optim::LRScheduler* schedule = nullptr;  // the run's, or null
  int64_t epoch = 0;                       // 1-based: the epoch running, or the one just finished
  int64_t first_epoch = 1;                 // this fit's first epoch: after Trainer::resume_after(n), n + 1
  int64_t epochs = 0;                      // the run's last epoch
  int64_t step = 0;                        // 1-based within the epoch, at on_step_end
  int64_t steps_per_epoch = 0;
  int64_t global_step = 0;  // steps since the run began
  // The epoch's sums so far. On a GPU the loss and correct count are summed on the device and
  // read back only when a callback asks (Callback::needs_step_totals) and at the epoch's end.
  EpochTotals running;
  double epoch_seconds = 0;       // the epoch's wall time so far
  int64_t epoch_samples = 0;      // samples loaded in the epoch so far, over all ranks
  double epoch_wait_seconds = 0;  // of epoch_seconds, the time spent waiting for data
  bool has_validation = false;
  int rank = 0, world = 1;           // under data parallel: this process's rank, and the ranks training
  std::vector<EpochRecord> history;  // this run's finished epochs
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool stop = false;
  bool abandon_epoch = false;  // stop_now: the epoch is neither recorded nor validated
  std::string stop_reason;
  // The callbacks' state a training checkpoint keeps (SaveCheckpoint), so that a resumed run
  // continues as the straight one would: each callback sets its entries (keys it names after
  // itself and its metric) at each epoch's end and reads them back at on_train_begin. A fit after
  // Trainer::resume_after(n, state) starts with the checkpoint's; any other fit with none.
  io::Metadata callback_state;

  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  // From on_step_end: the loop ends the epoch after this step and stops; from on_epoch_end: the
  // run stops after this epoch. Keras's model.stop_training.
  void request_stop(std::string reason);
  // From on_step_end: the loop stops after this step without finishing the epoch (no record, no
  // validation, no on_epoch_end): a profiler that has recorded its steps.
  void stop_now(std::string reason);
  void keep_state(const std::string& key, std::string value);   // sets or replaces an entry of callback_state
  const std::string* kept_state(const std::string& key) const;  // null when absent
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(TrainContext&) {}
  virtual void on_epoch_begin(TrainContext&) {}
  // Asked after each step, before on_step_end: true when this call needs `running` up to date.
  // On a GPU that is a wait for the device; a progress line asks only when it draws.
  virtual bool needs_step_totals(const TrainContext&) { return false; }
  virtual void on_step_end(TrainContext&) {}
  virtual void on_epoch_end(TrainContext&, const EpochRecord&) {}
  // After every callback's on_epoch_end: a checkpoint written here holds the state the others
  // reached at the epoch (their callback_state, an lr ReduceLROnPlateau lowered).
  virtual void on_epoch_checkpoint(TrainContext&, const EpochRecord&) {}
  virtual void on_train_end(TrainContext&) {}
};
using CallbackPtr = std::shared_ptr<Callback>;

// Calls each callback in the order added.
struct CallbackList {
  std::vector<CallbackPtr> items;
  void train_begin(TrainContext& c);
  void epoch_begin(TrainContext& c);
  bool needs_step_totals(const TrainContext& c);  // whether any callback does
  void step_end(TrainContext& c);
  void epoch_end(TrainContext& c, const EpochRecord& r);  // on_epoch_end, then on_epoch_checkpoint
  void train_end(TrainContext& c);
};

// The metrics a callback can monitor: "loss", "accuracy", "val_loss", "val_accuracy",
// "val_macro_f1", "lr". Anything else is an mdl::Error naming the choices.
void check_metric_name(const std::string& name, const char* who);
double metric_value(const EpochRecord& r, const std::string& name);
// A val_ metric needs a run with validation data; throws naming `who` otherwise.
void check_monitor_available(const TrainContext& c, const std::string& name, const char* who);

// Whether a larger value of the metric is better: Auto chooses Max for accuracies and F1.
enum class Mode { Auto, Min, Max };
bool mode_is_max(Mode mode, const std::string& metric);

}  // namespace mdl::train
