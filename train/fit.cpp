// Trainer: the epoch loop around TrainStep, EpochMeter and validate, with the callbacks called
// at each fixed point.
#include "train/fit.h"

#include <cmath>

#include "tensor/allocator.h"
#include "tensor/error.h"
#include "train/callbacks.h"
#include "train/epoch_meter.h"

namespace mdl::train {
namespace {

TrainerConfig checked(TrainerConfig c) {
  MDL_CHECK(c.model, "Trainer: no model");
  MDL_CHECK(c.optimizer, "Trainer: no optimizer (give TrainerConfig::optimizer, e.g. an optim::AdamW)");
  MDL_CHECK(c.loss, "Trainer: no loss function");
  MDL_CHECK(c.train, "Trainer: no training DataLoader");
  MDL_CHECK(c.autocast == kF32 || c.autocast == kF16 || c.autocast == kBF16,
            "Trainer: autocast must be kF32 (off), kF16 or kBF16, got ", dtype_name(c.autocast));
  MDL_CHECK(c.grad_accum >= 1, "Trainer: grad_accum must be at least 1, got ", c.grad_accum);
  MDL_CHECK(c.clip >= 0 && std::isfinite(c.clip), "Trainer: clip must be a finite number >= 0, got ", c.clip);
  MDL_CHECK(c.classes >= 0, "Trainer: classes must be >= 0, got ", c.classes);
  return c;
}

}  // namespace

Trainer::Trainer(TrainerConfig config)
    : c_(checked(std::move(config))), dp_(false, c_.device), scaler_({.enabled = c_.autocast == kF16}) {
  c_.model->to(c_.device);
  step_ = std::make_unique<TrainStep>(*c_.model, dp_, *c_.optimizer, scaler_, c_.schedule.get(), c_.loss,
                                      StepOptions{.grad_accum = c_.grad_accum,
                                                  .clip = c_.clip,
                                                  .autocast = c_.autocast != kF32,
                                                  .amp_dtype = amp_dtype()});
}

Trainer& Trainer::add(CallbackPtr callback) {
  MDL_CHECK(callback, "Trainer::add: a null callback");
  MDL_CHECK(!(c_.schedule && dynamic_cast<ReduceLROnPlateau*>(callback.get())),
            "Trainer::add: ReduceLROnPlateau with an LR schedule: the schedule would overwrite its lr at every step");
  callbacks_.items.push_back(std::move(callback));
  return *this;
}

EpochRecord Trainer::train_epoch(TrainContext& ctx) {
  data::DataLoader& loader = *c_.train;
  c_.model->train();
  reset_peak_memory(c_.device);
  loader.set_epoch(ctx.epoch - 1);
  EpochMeter meter(loader, nullptr, false, ctx.epoch, ctx.epochs, 1);
  const double wait_before = loader.stats().wait_seconds;
  ctx.running = {};
  ctx.step = 0;
  for (auto& [xb, yb] : loader) {
    (*step_)(xb.to(c_.device), yb.to(c_.device), ctx.running);
    step_->flush_totals(ctx.running);  // callbacks read the running sums after every step
    ++ctx.step, ++ctx.global_step;
    ctx.epoch_wait_seconds = loader.stats().wait_seconds - wait_before;
    callbacks_.step_end(ctx);
    if (ctx.stop) break;
  }
  EpochRecord r = meter.record(ctx.running, dp_);
  MDL_CHECK(std::isfinite(r.train_loss), "Trainer::fit: training diverged in epoch ", ctx.epoch,
            ": the mean training loss is ", r.train_loss);
  r.lr = c_.optimizer->lr();
  r.skipped_steps = scaler_.skipped_steps();
  r.peak_bytes = memory_stats(c_.device).peak_bytes;
  if (c_.validation) {
    const Validation v = evaluate(*c_.validation);
    r.val_loss = v.loss, r.val_accuracy = v.accuracy, r.val_macro_f1 = v.macro_f1;
  }
  return r;
}

std::vector<EpochRecord> Trainer::fit(int64_t epochs) {
  MDL_CHECK(epochs >= 0, "Trainer::fit: epochs must be >= 0, got ", epochs);
  TrainContext ctx;
  ctx.model = c_.model.get();
  ctx.optimizer = c_.optimizer.get();
  const int64_t first = int64_t(history_.size());
  ctx.epochs = first + epochs;
  ctx.steps_per_epoch = c_.train->size();
  ctx.has_validation = c_.validation != nullptr;
  stop_reason_.clear();
  callbacks_.train_begin(ctx);
  std::vector<EpochRecord> records;
  for (int64_t e = first; e < ctx.epochs && !ctx.stop; ++e) {
    ctx.epoch = e + 1;
    callbacks_.epoch_begin(ctx);
    const EpochRecord r = train_epoch(ctx);
    records.push_back(r);
    history_.push_back(r);
    ctx.history.push_back(r);
    callbacks_.epoch_end(ctx, r);
  }
  callbacks_.train_end(ctx);
  stop_reason_ = ctx.stop_reason;
  return records;
}

Validation Trainer::evaluate(data::DataLoader& loader) {
  return validate(*c_.model, loader, c_.device, c_.autocast != kF32, amp_dtype(), c_.classes, {}, c_.loss);
}

}  // namespace mdl::train
