// train::Trainer: Keras's model.fit for any nn::Module. The caller brings the model, the data
// loaders, the loss and the optimizer (and, if wanted, an LR schedule, mixed precision, gradient
// accumulation and clipping); fit(epochs) trains with mdl-train's own step (train_step.h) and
// validation (validate.h), calling the callbacks at each fixed point, and returns one
// EpochRecord per epoch.
//
//   train::Trainer trainer({.model = net, .optimizer = opt, .train = loader, .validation = val});
//   trainer.add(std::make_shared<train::EarlyStopping>(train::EarlyStoppingOptions{.patience = 3}));
//   auto history = trainer.fit(20);
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"
#include "train/callback.h"
#include "train/distributed.h"
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
  Device device = Device::cpu();                           // the model is moved there
  DType autocast = kF32;  // kF16 or kBF16: mixed precision (f16 with a dynamic loss scaler)
  int64_t grad_accum = 1;
  double clip = 0;      // max global gradient norm; 0 = off
  int64_t classes = 0;  // for validation's confusion matrix; 0: the logits' last dimension
};

class Trainer {
 public:
  // Throws mdl::Error naming what is missing or out of range.
  explicit Trainer(TrainerConfig config);
  Trainer& add(CallbackPtr callback);

  // Trains `epochs` more epochs (0: none), fewer when a callback stops the run; the epochs are
  // numbered on from earlier fits. Throws when the training loss stops being finite.
  std::vector<EpochRecord> fit(int64_t epochs);
  // One pass over `loader` in eval mode, without gradients.
  Validation evaluate(data::DataLoader& loader);

  const std::vector<EpochRecord>& history() const { return history_; }  // every fit's epochs
  const std::string& stop_reason() const { return stop_reason_; }       // the last fit's; empty when it ran out
  nn::Module& model() { return *c_.model; }
  optim::Optimizer& optimizer() { return *c_.optimizer; }

 private:
  EpochRecord train_epoch(TrainContext& ctx);
  DType amp_dtype() const { return c_.autocast == kF32 ? kF16 : c_.autocast; }  // AutocastGuard's, when off

  TrainerConfig c_;
  CallbackList callbacks_;
  DataParallel dp_;
  amp::GradScaler scaler_;
  std::unique_ptr<TrainStep> step_;
  std::vector<EpochRecord> history_;
  std::string stop_reason_;
};

}  // namespace mdl::train
