// run_training: set up from the options, then for each epoch train its steps, measure, validate,
// log and checkpoint. Data parallel, profiling, logging and checkpoints sit behind the helpers
// in this folder; the step itself is train_step.cpp.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "nn/summary.h"
#include "ops/factory.h"
#include "ops/ops.h"
#include "tensor/allocator.h"
#include "tensor/parallel.h"
#include "train/checkpoint.h"
#include "train/distributed.h"
#include "train/epoch_log.h"
#include "train/epoch_meter.h"
#include "train/evaluate.h"
#include "train/option_callbacks.h"
#include "train/order_dump.h"
#include "train/setup.h"
#include "train/step_profiler.h"
#include "train/train_step.h"
#include "train/validate.h"

namespace mdl::train {
namespace {

// Whether every parameter is finite: x * 0 is 0 for a finite x and NaN for inf or NaN.
bool weights_finite(nn::Module& model) {
  for (const Tensor& p : model.parameters())
    if (!std::isfinite(sum(p.detach().to(kF32) * 0.0).item<float>())) return false;
  return true;
}

}  // namespace

TrainReport run_training(const TrainOptions& o, std::FILE* out) {
  if (o.threads > 0) set_num_threads(int(o.threads));
  manual_seed(o.seed);
  const Device device = parse_device(o.device);
  DataParallel dp(o.dist, device);
  if (dp.rank() != 0) out = nullptr;  // rank 0 alone prints
  TrainReport report;
  const DataBundle d = make_data(o);
  report.data_description = d.description;
  nn::ModulePtr model = make_model(o, d);
  report.parameters = model->num_parameters();
  report.model_summary = nn::summary(*model, example_input(d));
  if (out)
    std::fprintf(out, "data: %s; %lld training samples, %lld validation samples\n%s\n", d.description.c_str(),
                 (long long)d.train->size(), (long long)(d.test ? d.test->size() : 0), report.model_summary.c_str());
  model->to(device);
  if (o.channels_last) model->to(MemoryFormat::ChannelsLast);  // before the optimizer makes its state
  auto opt = make_optimizer(o, *model);
  data::LoaderOptions lo = make_loader_options(o, d);
  dp.shard(lo, d.train->size(), o.seed);
  data::DataLoader train_loader(*d.train, lo);
  const std::unique_ptr<data::DataLoader> val_loader = make_validation_loader(o, d, lo);  // null without a test split
  auto schedule = make_schedule(o, *opt, train_loader.size());
  const bool autocast = o.amp != "none";
  const DType amp_dtype = o.amp == "bf16" ? kBF16 : kF16;
  if (!o.evaluate.empty()) {
    MDL_CHECK(val_loader, "mdl-train --evaluate: ", d.description, " has no held-out split to evaluate on");
    report.evaluation = evaluate_weights(o.evaluate, *model, *val_loader, d.test->size(), device, autocast, amp_dtype,
                                         d.classes, d.class_names);
    report.evaluated = true;
    report.confusion = report.evaluation.result.confusion;
    const Validation& v = report.evaluation.result;
    if (out)
      std::fprintf(out,
                   "evaluated %s on %lld held-out samples: loss %.4f acc %.2f%% macro-F1 %.4f | %.2fs, %.0f images/s\n",
                   o.evaluate.c_str(), (long long)report.evaluation.samples, v.loss, 100 * v.accuracy, v.macro_f1,
                   report.evaluation.seconds, report.evaluation.images_per_second());
    report.total_seconds = report.evaluation.seconds;
    return report;
  }
  amp::GradScaler scaler({.enabled = o.amp == "f16"});
  TrainStep train_step(o, *model, dp, *opt, scaler, schedule.get(), autocast, amp_dtype);
  if (!o.dump_order.empty() && dp.rank() == 0) dump_epoch_orders(o.dump_order, train_loader, o.epochs);
  int64_t first_epoch = 0;
  if (!o.resume.empty()) {
    first_epoch = resume_checkpoint(o.resume, *model, *opt, scaler);
    if (schedule) schedule->set_epoch(first_epoch * train_loader.size());
    if (out) std::fprintf(out, "resumed from %s after epoch %lld\n", o.resume.c_str(), (long long)first_epoch);
  }
  dp.wrap(model, scaler, o.bucket_mb);
  EpochLog log(dp.rank() == 0 ? o.log : "", out, o.epochs, !o.resume.empty());  // rank 0 alone writes the CSV
  const bool terminal = out && o.progress && out == stderr;
  OptionCallbacks callbacks = callbacks_from_options(o);
  if (!callbacks.list.items.empty() && !val_loader)
    throw UsageError("mdl-train: --early-stop, --save-best, --plateau and --target-accuracy watch the held-out split, "
                     "and " +
                     d.description + " has none");
  TrainContext ctx;
  ctx.model = model.get(), ctx.optimizer = opt.get(), ctx.epochs = o.epochs;
  ctx.steps_per_epoch = train_loader.size(), ctx.has_validation = val_loader != nullptr;
  callbacks.list.train_begin(ctx);
  const auto run_start = ctx.start;
  for (int64_t epoch = first_epoch; epoch < o.epochs; ++epoch) {
    model->train();
    reset_peak_memory(device);
    train_loader.set_epoch(epoch);
    EpochMeter meter(train_loader, out, terminal, epoch + 1, o.epochs, dp.world());
    StepProfiler profiling(o.profile);
    EpochTotals totals;
    int64_t step = 0, first_nonfinite_step = 0;
    for (auto& [xb, yb] : train_loader) {
      Tensor x = xb.to(device);
      const Tensor y = yb.to(device);
      if (o.channels_last && x.dim() == 4) x = x.contiguous(MemoryFormat::ChannelsLast);
      train_step(x, y, totals);
      ++step;
      // On a GPU the sums are read only when the progress line is drawn (TrainStep::flush_totals).
      const bool show = meter.progress_due(step);
      if (show) train_step.flush_totals(totals);
      if (!first_nonfinite_step && !std::isfinite(totals.loss_sum)) {
        first_nonfinite_step = step;
        if (dp.world() == 1) break;  // with several ranks, all decide together below, from the summed loss
      }
      if (profiling.after_step(step)) break;  // --profile: the recorded steps are done
      if (show) meter.show_progress(step, totals);
    }
    train_step.flush_totals(totals);
    if (!first_nonfinite_step && !std::isfinite(totals.loss_sum)) first_nonfinite_step = step;
    meter.end_progress();
    if (profiling.enabled()) {  // --profile stops after one epoch's recorded steps
      report.profile_table = profiling.finish(step, o.trace, dp.rank() == 0, out);
      break;
    }
    EpochRecord r = meter.record(totals, dp);
    // A diverged run stops here, before it validates, logs or overwrites the last good checkpoint.
    if (!std::isfinite(r.train_loss) || !weights_finite(*model))
      MDL_FAIL("training diverged in epoch ", epoch + 1,
               first_nonfinite_step ? ": the loss was found non-finite at step " + std::to_string(first_nonfinite_step)
                                    : std::string(": the loss or the weights are no longer finite"),
               o.save.empty() ? std::string() : "; '" + o.save + "' was not overwritten");
    r.lr = opt->lr();
    r.skipped_steps = scaler.skipped_steps();
    r.peak_bytes = memory_stats(device).peak_bytes;
    if (val_loader && dp.rank() == 0) {
      const Validation v = validate(*model, *val_loader, device, autocast, amp_dtype, d.classes, d.class_names);
      r.val_loss = v.loss, r.val_accuracy = v.accuracy, r.val_macro_f1 = v.macro_f1;
      report.confusion = v.confusion;
    }
    report.epochs.push_back(r);
    log.write(r);
    if (!o.save.empty() && dp.rank() == 0) save_checkpoint(o.save, *model, *opt, scaler, o, epoch + 1);
    dp.barrier();  // the others wait while rank 0 validates and saves
    ctx.epoch = epoch + 1;
    ctx.history.push_back(r);
    callbacks.list.epoch_end(ctx, r);
    if (ctx.stop) {
      if (out) std::fprintf(out, "stopped after epoch %lld: %s\n", (long long)(epoch + 1), ctx.stop_reason.c_str());
      report.stop_reason = ctx.stop_reason;
      break;
    }
  }
  callbacks.list.train_end(ctx);
  if (o.cuda_graph && out)
    std::fprintf(out, "cuda graph: %lld steps replayed from %lld capture(s); the others ran eagerly\n",
                 (long long)train_step.replayed_steps(), (long long)train_step.captures());
  if (callbacks.target && callbacks.target->reached())
    report.target_epoch = callbacks.target->epoch(), report.target_seconds = callbacks.target->seconds();
  report.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  report.rank = dp.rank();
  return report;
}

}  // namespace mdl::train
