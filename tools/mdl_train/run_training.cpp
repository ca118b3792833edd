// run_training: options into a Trainer and its callbacks, then one call of Trainer::fit. The
// epoch loop and the step are the library's (train/trainer.cpp, train/train_step.cpp).
#include "tools/mdl_train/run_training.h"

#include <chrono>
#include <filesystem>

#include "amp/amp_config.h"
#include "data/loader.h"
#include "nn/summary.h"
#include "ops/native/factory.h"
#include "tensor/parallel.h"
#include "tools/mdl_train/option_callbacks.h"
#include "tools/mdl_train/order_dump.h"
#include "tools/mdl_train/output_files.h"
#include "tools/mdl_train/roofline_plot.h"
#include "tools/mdl_train/setup.h"
#include "train/builtin_callbacks.h"
#include "train/checkpoint.h"
#include "train/profile_steps.h"
#include "train/roofline_ceilings.h"
#include "train/trainer.h"

namespace mdl::train {

namespace {

profiler::SortBy profile_sort(const std::string& name) {
  if (name == "self") return profiler::SortBy::Self;
  if (name == "calls") return profiler::SortBy::Calls;
  if (name == "headroom") return profiler::SortBy::Headroom;
  return profiler::SortBy::Total;
}

// The ceilings for --profile's roofline, from --ceilings or beside the program. Asked for (--roofline,
// --ceilings, --profile-sort headroom), they are measured and saved there when missing, and a file
// that is corrupt or from another machine stops the run; otherwise a missing or unusable file
// leaves the table without the roofline columns and says how to get them.
std::optional<profiler::Ceilings> profile_ceilings(const TrainOptions& o, std::FILE* out) {
  const std::string path = o.ceilings.empty() ? profiler::default_ceilings_path() : o.ceilings;
  const bool asked = !o.roofline.empty() || !o.ceilings.empty() || o.profile_sort == "headroom";
  if (!asked && !std::filesystem::exists(path)) {
    if (out)
      std::fprintf(out,
                   "roofline: no ceilings in %s; `make roofline` (mdl-roofline) measures them, --roofline FILE.png "
                   "measures and draws them\n",
                   path.c_str());
    return std::nullopt;
  }
  try {
    bool measured = false;
    profiler::Ceilings c = ceilings_for_this_machine(path, false, &measured);
    if (measured && out)
      std::fprintf(out, "roofline: no ceilings in %s yet; measured them now (%.1f s) and saved them there\n",
                   path.c_str(), double(c.measure_ms) / 1000);
    return c;
  } catch (const Error& e) {
    if (asked) throw;
    if (out) std::fprintf(out, "roofline: %s; profiling without the roofline columns\n", e.what());
    return std::nullopt;
  }
}

}  // namespace

TrainReport run_training(const TrainOptions& o, std::FILE* out) {
  if (o.threads > 0) set_num_threads(int(o.threads));
  manual_seed(o.seed);
  const Device device = parse_device(o.device);
  auto dp = std::make_shared<DataParallel>(o.dist, device, o.bucket_mb, o.dist_timeout);
  if (dp->rank() != 0) out = nullptr;  // rank 0 alone prints
  TrainReport report;
  report.rank = dp->rank();
  if (dp->rank() == 0) check_output_files_creatable(o);
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
  std::shared_ptr<optim::Optimizer> opt = make_optimizer(o, *model);
  data::LoaderOptions lo = make_loader_options(o, d);
  dp->shard(lo, d.train->size(), o.seed);
  auto train_loader = std::make_shared<data::DataLoader>(*d.train, lo);
  std::shared_ptr<data::DataLoader> val_loader = make_validation_loader(o, d, lo);  // null without a test split
  std::shared_ptr<optim::LRScheduler> schedule = make_schedule(o, *opt, train_loader->size());
  const amp::AmpConfig amp = amp::parse_amp(o.amp);
  if (!o.evaluate.empty()) {
    MDL_CHECK(val_loader, "--evaluate: ", d.description, " has no held-out split to evaluate on");
    report.evaluation = evaluate_weights(o.evaluate, *model, *val_loader, d.test->size(), device, amp, d.classes,
                                         d.class_names);
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
  Trainer trainer({.model = model,
                   .optimizer = opt,
                   .train = train_loader,
                   .validation = val_loader,
                   .schedule = schedule,
                   .device = device,
                   .amp = amp,
                   .grad_accum = o.grad_accum,
                   .clip = o.clip,
                   .l2 = o.l2,
                   .l2_weights = o.l2 > 0 ? dense_weights(*model) : std::vector<Tensor>{},
                   .input_format = o.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous,
                   .cuda_graph = o.cuda_graph,
                   .data_parallel = dp,
                   .classes = d.classes,
                   .class_names = d.class_names});
  if (!o.dump_order.empty() && dp->rank() == 0) dump_epoch_orders(o.dump_order, *train_loader, o.epochs);
  int64_t first_epoch = 0;
  if (!o.resume.empty()) {
    io::Metadata callback_state;
    first_epoch = resume_checkpoint(o.resume, *model, *opt, trainer.scaler(), schedule.get(), train_loader->size(),
                                    &callback_state);
    trainer.resume_after(first_epoch, std::move(callback_state));
    if (out) std::fprintf(out, "resumed from %s after epoch %lld\n", o.resume.c_str(), (long long)first_epoch);
    if (out && first_epoch >= o.epochs)
      std::fprintf(out, "nothing to train: --epochs %lld is not past the checkpoint's epoch %lld\n",
                   (long long)o.epochs, (long long)first_epoch);
  }

  // The callbacks, in the order they are called at each point.
  std::shared_ptr<ProfileSteps> profile;
  if (o.profile) {
    const std::string trace = o.trace.empty() ? "mdl-trace.json" : o.trace;
    profile = std::make_shared<ProfileSteps>(
        o.profile,
        ProfileStepsOptions{.trace_path = dp->rank() == 0 ? trace : "",
                            .out = out,
                            .ceilings = dp->rank() == 0 ? profile_ceilings(o, out) : std::nullopt,
                            .sort_by = dp->rank() == 0 ? profile_sort(o.profile_sort) : profiler::SortBy::Total});
    trainer.add(profile);
  }
  if (out) trainer.add(std::make_shared<ProgressPrinter>(out, o.progress && out == stderr));
  if (!o.log.empty() && dp->rank() == 0) trainer.add(std::make_shared<CsvLogger>(o.log, !o.resume.empty()));
  if (!o.save.empty())
    trainer.add(std::make_shared<SaveCheckpoint>(o.save, io::Metadata{{"model", o.model}, {"data", o.data}}));
  OptionCallbacks watching = callbacks_from_options(o);
  if (!watching.list.items.empty() && !val_loader)
    throw UsageError("mdl-train: --early-stop, --save-best, --plateau and --target-accuracy watch the held-out split, "
                     "and " +
                     d.description + " has none");
  for (const CallbackPtr& c : watching.list.items) trainer.add(c);

  const auto start = std::chrono::steady_clock::now();
  try {
    trainer.fit(std::max<int64_t>(0, o.epochs - first_epoch));
  } catch (const TrainingDiverged& e) {
    MDL_FAIL(e.what(), o.save.empty() ? std::string() : "; '" + o.save + "' was not overwritten");
  }
  report.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.epochs = trainer.history();
  report.confusion = trainer.last_validation().confusion;
  report.stop_reason = profile ? "" : trainer.stop_reason();
  if (profile) report.profile_table = profile->table();
  if (profile && profile->session() && !o.roofline.empty() && dp->rank() == 0) {
    roofline_png(o.roofline, *profile->session(), profile->roofline());
    if (out) std::fprintf(out, "roofline chart written to %s\n", o.roofline.c_str());
  }
  if (o.cuda_graph && out)
    std::fprintf(out, "cuda graph: %lld steps replayed from %lld capture(s); the others ran eagerly\n",
                 (long long)trainer.step().replayed_steps(), (long long)trainer.step().captures());
  if (watching.target && watching.target->reached())
    report.target_epoch = watching.target->epoch(), report.target_seconds = watching.target->seconds();
  return report;
}

}  // namespace mdl::train
