// Trainer::fit, the one epoch loop: each epoch its steps (TrainStep), its record (EpochMeter),
// its validation, and the callbacks at each fixed point.
#include "train/trainer.h"

#include <cmath>
#include <utility>

#include "ops/ops.h"
#include "tensor/allocator.h"
#include "train/builtin_callbacks.h"

namespace mdl::train {
namespace {

TrainerConfig checked(TrainerConfig c) {
  MDL_CHECK(c.model, "Trainer: no model");
  MDL_CHECK(c.optimizer, "Trainer: no optimizer (give TrainerConfig::optimizer, e.g. an optim::AdamW)");
  MDL_CHECK(c.loss, "Trainer: no loss function");
  MDL_CHECK(c.train, "Trainer: no training DataLoader");
  MDL_CHECK(c.amp.dtype == kF32 || c.amp.dtype == kF16 || c.amp.dtype == kBF16,
            "Trainer: amp.dtype must be kF32 (off), kF16 or kBF16, got ", dtype_name(c.amp.dtype));
  MDL_CHECK(c.grad_accum >= 1, "Trainer: grad_accum must be at least 1, got ", c.grad_accum);
  MDL_CHECK(c.clip >= 0 && std::isfinite(c.clip), "Trainer: clip must be a finite number >= 0, got ", c.clip);
  MDL_CHECK(c.l2 >= 0 && std::isfinite(c.l2), "Trainer: l2 must be a finite number >= 0, got ", c.l2);
  MDL_CHECK(c.l2 == 0 || !c.l2_weights.empty(), "Trainer: l2 is ", c.l2, " but l2_weights names no tensor to penalise");
  MDL_CHECK(!c.cuda_graph || c.device.is_cuda(), "Trainer: cuda_graph needs a CUDA device, got ", c.device);
  MDL_CHECK(c.classes >= 0, "Trainer: classes must be >= 0, got ", c.classes);
  return c;
}

// Whether every parameter is finite: x * 0 is 0 for a finite x and NaN for inf or NaN.
bool weights_finite(nn::Module& model) {
  for (const Tensor& p : model.parameters())
    if (!std::isfinite(sum(p.detach().to(kF32) * 0.0).item<float>())) return false;
  return true;
}

}  // namespace

Trainer::Trainer(TrainerConfig config)
    : c_(checked(std::move(config))),
      dp_(c_.data_parallel ? c_.data_parallel : std::make_shared<DataParallel>(false, c_.device)),
      scaler_({.enabled = c_.amp.loss_scaling()}) {
  c_.model->to(c_.device);
  // On a GPU the step's loss and accuracy stay on the device until read: the host never waits.
  step_ = std::make_unique<TrainStep>(*c_.model, *dp_, *c_.optimizer, scaler_, c_.schedule.get(), c_.loss,
                                      StepOptions{.grad_accum = c_.grad_accum,
                                                  .clip = c_.clip,
                                                  .l2 = c_.l2,
                                                  .amp = c_.amp,
                                                  .defer_totals = c_.device.is_cuda(),
                                                  .cuda_graph = c_.cuda_graph},
                                      c_.l2_weights);
}

Trainer& Trainer::add(CallbackPtr callback) {
  MDL_CHECK(callback, "Trainer::add: a null callback");
  MDL_CHECK(!(c_.schedule && dynamic_cast<ReduceLROnPlateau*>(callback.get())),
            "Trainer::add: ReduceLROnPlateau with an LR schedule: the schedule would overwrite its lr at every step");
  callbacks_.items.push_back(std::move(callback));
  return *this;
}

void Trainer::resume_after(int64_t epochs_done, io::Metadata callback_state) {
  MDL_CHECK(epochs_done >= 0, "Trainer::resume_after: epochs_done must be >= 0, got ", epochs_done);
  epochs_done_ = epochs_done;
  resumed_state_ = std::move(callback_state);
}

std::vector<EpochRecord> Trainer::fit(int64_t epochs) {
  MDL_CHECK(epochs >= 0, "Trainer::fit: epochs must be >= 0, got ", epochs);
  if (dp_->enabled() && !dp_->attached()) dp_->attach(c_.model, scaler_);  // after any resume
  TrainContext ctx;
  ctx.model = c_.model.get(), ctx.optimizer = c_.optimizer.get(), ctx.scaler = &scaler_;
  ctx.schedule = c_.schedule.get();
  ctx.first_epoch = epochs_done_ + 1;
  ctx.callback_state = std::exchange(resumed_state_, {});
  ctx.epochs = epochs_done_ + epochs;
  ctx.steps_per_epoch = c_.train->size();
  ctx.has_validation = c_.validation != nullptr;
  ctx.rank = dp_->rank(), ctx.world = dp_->world();
  stop_reason_.clear();
  callbacks_.train_begin(ctx);
  std::vector<EpochRecord> records;
  try {
    while (epochs_done_ < ctx.epochs && !ctx.stop) {
      ctx.epoch = epochs_done_ + 1;
      callbacks_.epoch_begin(ctx);
      c_.model->train();
      reset_peak_memory(c_.device);
      c_.train->set_epoch(epochs_done_);
      const EpochMeter meter(*c_.train, ctx.epoch, dp_->world());
      int64_t first_nonfinite_step = 0;
      if (!train_epoch(ctx, meter, first_nonfinite_step)) break;
      const EpochRecord r = finish_epoch(ctx, meter, first_nonfinite_step);
      ++epochs_done_;
      records.push_back(r);
      history_.push_back(r);
      ctx.history.push_back(r);
      callbacks_.epoch_end(ctx, r);
      dp_->barrier();  // the other ranks wait while rank 0 validates and saves
    }
  } catch (const TrainingDiverged& e) {
    // The diverged epoch reaches no callback, but the run's end does, as Keras's after
    // TerminateOnNaN: EarlyStopping puts its best weights back, the progress line ends.
    ctx.stop = ctx.abandon_epoch = true;
    ctx.stop_reason = e.what();
    callbacks_.train_end(ctx);
    stop_reason_ = ctx.stop_reason;
    throw;
  }
  callbacks_.train_end(ctx);
  stop_reason_ = ctx.stop_reason;
  return records;
}

bool Trainer::train_epoch(TrainContext& ctx, const EpochMeter& meter, int64_t& first_nonfinite_step) {
  ctx.running = {};
  ctx.step = 0;
  for (auto& [xb, yb] : *c_.train) {
    Tensor x = xb.to(c_.device);
    if (c_.input_format != MemoryFormat::Contiguous && x.dim() == 4) x = x.contiguous(c_.input_format);
    (*step_)(x, yb.to(c_.device), ctx.running);
    ++ctx.step, ++ctx.global_step;
    if (callbacks_.needs_step_totals(ctx)) step_->flush_totals(ctx.running);  // on a GPU, a wait
    // A non-finite loss (when it is known) ends a lone process's epoch at once; several ranks
    // decide together at the epoch's end, from the summed loss.
    if (!first_nonfinite_step && !std::isfinite(ctx.running.loss_sum)) {
      first_nonfinite_step = ctx.step;
      if (dp_->world() == 1) break;
    }
    ctx.epoch_seconds = meter.seconds();
    ctx.epoch_samples = meter.samples();
    ctx.epoch_wait_seconds = meter.wait_seconds();
    callbacks_.step_end(ctx);
    if (ctx.abandon_epoch) return false;
    if (ctx.stop) break;
  }
  step_->flush_totals(ctx.running);
  if (!first_nonfinite_step && !std::isfinite(ctx.running.loss_sum)) first_nonfinite_step = ctx.step;
  return true;
}

EpochRecord Trainer::finish_epoch(const TrainContext& ctx, const EpochMeter& meter, int64_t first_nonfinite_step) {
  EpochRecord r = meter.record(ctx.running, *dp_);
  // A diverged run stops here, before it validates or any callback logs or saves the epoch.
  if (!std::isfinite(r.train_loss) || !weights_finite(*c_.model))
    throw TrainingDiverged(detail::concat(
        "training diverged in epoch ", ctx.epoch,
        first_nonfinite_step ? ": the loss was found non-finite at step " + std::to_string(first_nonfinite_step)
                             : std::string(": the loss or the weights are no longer finite")));
  r.lr = c_.optimizer->lr();
  r.skipped_steps = scaler_.skipped_steps();
  r.peak_bytes = memory_stats(c_.device).peak_bytes;
  if (c_.validation && dp_->rank() == 0) {  // rank 0 alone validates
    last_validation_ = evaluate(*c_.validation);
    r.val_loss = last_validation_.loss, r.val_accuracy = last_validation_.accuracy;
    r.val_macro_f1 = last_validation_.macro_f1;
  }
  return r;
}

Validation Trainer::evaluate(data::DataLoader& loader) {
  return validate(*c_.model, loader, c_.device, c_.amp, c_.classes, c_.class_names, c_.loss);
}

}  // namespace mdl::train
