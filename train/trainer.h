// train::Trainer: Keras's model.fit for any nn::Module, and the one training loop of mdl:
// mdl-train, mdl-study, the examples and the tests all train through Trainer::fit. The caller
// brings the model, the data loaders, the loss and the optimizer (and, if wanted, an LR schedule,
// mixed precision, gradient accumulation, clipping, an L2 penalty, a CUDA Graph of the step or
// data parallel); fit(epochs) runs the epochs, each step with TrainStep (train_step.h) and each
// validation with validate (validate.h), calling the callbacks at each fixed point, and returns
// one EpochRecord per epoch. Printing, logging, checkpoints and profiling are callbacks.
//
//   train::Trainer trainer({.model = net, .optimizer = opt, .train = loader, .validation = val});
//   trainer.add(std::make_shared<train::EarlyStopping>(train::EarlyStoppingOptions{.patience = 3}));
//   auto history = trainer.fit(20);
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amp/amp_config.h"
#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"
#include "tensor/error.h"
#include "tensor/memory_format.h"
#include "train/callback.h"
#include "train/data_parallel.h"
#include "train/epoch_meter.h"
#include "train/epoch_record.h"
#include "train/loss_fn.h"
#include "train/train_step.h"
#include "train/validate.h"

namespace mdl::train {

struct TrainerConfig {
  nn::ModulePtr model;
  std::shared_ptr<optim::Optimizer> optimizer;  // built on the model's parameters
  LossFn loss = cross_entropy_loss;
  std::shared_ptr<data::DataLoader> train;
  std::shared_ptr<data::DataLoader> validation = nullptr;  // none: val_* stay NaN
  std::shared_ptr<optim::LRScheduler> schedule = nullptr;  // stepped after each optimizer step
  Device device = Device::cpu();                           // the model and each batch are moved there
  amp::AmpConfig amp{};  // {kF16} or {kBF16}: mixed precision (f16 with a dynamic loss scaler)
  int64_t grad_accum = 1;
  double clip = 0;                                       // max global gradient norm; 0 = off
  double l2 = 0;                                         // a penalty l2 * sum(w^2) over l2_weights, added to the loss
  std::vector<Tensor> l2_weights{};                      // what l2 penalises (mdl-train: every Linear layer's weight)
  MemoryFormat input_format = MemoryFormat::Contiguous;  // ChannelsLast: 4-D batches laid out NHWC
  bool cuda_graph = false;  // on a GPU: capture the step once as a CUDA Graph and replay it
  std::shared_ptr<DataParallel> data_parallel = nullptr;  // under mpirun: DDP's gradient hooks
  int64_t classes = 0;                     // for validation's confusion matrix; 0: the logits' last dimension
  std::vector<std::string> class_names{};  // its rows' labels; empty: the class numbers
};

// The error fit() throws when the loss or the weights stop being finite: nothing of the
// diverged epoch reached the callbacks (no checkpoint was overwritten).
struct TrainingDiverged : Error {
  using Error::Error;
};

class Trainer {
 public:
  // Throws mdl::Error naming what is missing or out of range.
  explicit Trainer(TrainerConfig config);
  Trainer& add(CallbackPtr callback);

  // Trains `epochs` more epochs (0: none), fewer when a callback stops the run; the epochs are
  // numbered on from earlier fits (and from resume_after). Throws TrainingDiverged when the
  // training loss or the weights stop being finite.
  std::vector<EpochRecord> fit(int64_t epochs);
  // The next fit numbers its epochs on from `epochs_done` (a run resumed from a checkpoint), and
  // its callbacks start from `callback_state` (the checkpoint's, from resume_checkpoint).
  void resume_after(int64_t epochs_done, io::Metadata callback_state = {});
  // One pass over `loader` in eval mode, without gradients.
  Validation evaluate(data::DataLoader& loader);

  const std::vector<EpochRecord>& history() const { return history_; }  // every fit's epochs
  const std::string& stop_reason() const { return stop_reason_; }       // the last fit's; empty when it ran out
  const Validation& last_validation() const { return last_validation_; }
  nn::Module& model() { return *c_.model; }
  optim::Optimizer& optimizer() { return *c_.optimizer; }
  amp::GradScaler& scaler() { return scaler_; }
  const TrainStep& step() const { return *step_; }

 private:
  // The epoch's steps, their sums in ctx.running; false when a callback abandoned it (stop_now).
  bool train_epoch(TrainContext& ctx, const EpochMeter& meter, int64_t& first_nonfinite_step);
  // The epoch's record, validated; throws TrainingDiverged first when it diverged.
  EpochRecord finish_epoch(const TrainContext& ctx, const EpochMeter& meter, int64_t first_nonfinite_step);

  TrainerConfig c_;
  CallbackList callbacks_;
  std::shared_ptr<DataParallel> dp_;
  amp::GradScaler scaler_;
  std::unique_ptr<TrainStep> step_;
  std::vector<EpochRecord> history_;
  int64_t epochs_done_ = 0;
  io::Metadata resumed_state_;  // for the next fit's callbacks
  std::string stop_reason_;
  Validation last_validation_;
};

}  // namespace mdl::train
