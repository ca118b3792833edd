// The built-in callbacks.
#include "train/builtin_callbacks.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include "io/safetensors.h"
#include "tensor/error.h"
#include "train/checkpoint.h"
#include "train/checkpoint_files.h"
#include "train/csv_log.h"
#include "train/epoch_meter.h"

namespace mdl::train {
namespace {

std::string exact(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// The entry the resumed checkpoint kept under `key`, or null; a fit from epoch 1 takes none.
const std::string* kept(const TrainContext& c, const std::string& key) {
  return c.first_epoch > 1 ? c.kept_state(key) : nullptr;
}

double kept_number(const TrainContext& c, const std::string& key, const char* who) {
  const std::string* text = c.kept_state(key);
  MDL_CHECK(text, who, ": the resumed checkpoint keeps no \"", key, "\"");
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  MDL_CHECK(!text->empty() && *end == '\0', who, ": the resumed checkpoint keeps \"", key, "\" as '", *text,
            "'; expected a number");
  return v;
}

int64_t kept_count(const TrainContext& c, const std::string& key, int64_t max, const char* who) {
  const double v = kept_number(c, key, who);
  MDL_CHECK(v >= 0 && v <= double(max) && v == std::floor(v), who, ": the resumed checkpoint keeps \"", key, "\" as ",
            *c.kept_state(key), "; expected a whole number from 0 to ", max);
  return int64_t(v);
}

}  // namespace

ProgressPrinter::ProgressPrinter(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {
  MDL_CHECK(out_, "ProgressPrinter: no output stream");
}

void ProgressPrinter::on_train_begin(TrainContext& c) { log_ = std::make_unique<EpochLog>("", out_, c.epochs); }

void ProgressPrinter::on_epoch_begin(TrainContext& c) {
  progress_ = std::make_unique<Progress>(out_, terminal_, c.epoch, c.epochs, c.steps_per_epoch);
}

bool ProgressPrinter::needs_step_totals(const TrainContext& c) { return progress_ && progress_->due(c.step); }

void ProgressPrinter::on_step_end(TrainContext& c) {
  if (!progress_ || c.abandon_epoch) return;  // a loop that does not call on_epoch_begin; a stopped epoch
  if (!progress_->due(c.step)) return;
  const double seconds = std::max(c.epoch_seconds, 1e-9);
  const double seen = double(std::max<int64_t>(c.running.seen, 1));
  progress_->update(c.step, c.running.loss_sum / seen, running_accuracy(c.running), double(c.epoch_samples) / seconds,
                    c.epoch_wait_seconds / seconds);
}

void ProgressPrinter::end_line() {
  if (progress_) progress_->finish();
  progress_.reset();
}

void ProgressPrinter::on_epoch_end(TrainContext&, const EpochRecord& r) {
  end_line();
  if (log_) log_->write(r);
}

void ProgressPrinter::on_train_end(TrainContext& c) {
  end_line();
  if (c.stop && !c.abandon_epoch)
    std::fprintf(out_, "stopped after epoch %lld: %s\n", (long long)c.epoch, c.stop_reason.c_str());
}

CsvLogger::CsvLogger(std::string path, bool append) : path_(std::move(path)), append_(append) {
  MDL_CHECK(!path_.empty(), "CsvLogger: no path");
}

void CsvLogger::on_train_begin(TrainContext& c) {
  if (log_) return;
  if (append_ && c.first_epoch > 1) drop_rows_from(path_, "epoch", c.first_epoch);
  log_ = std::make_unique<EpochLog>(path_, nullptr, c.epochs, append_);
}

void CsvLogger::on_epoch_end(TrainContext& c, const EpochRecord& r) {
  if (!log_) log_ = std::make_unique<EpochLog>(path_, nullptr, c.epochs, append_);
  log_->write(r);
}

SaveCheckpoint::SaveCheckpoint(std::string path, io::Metadata tags) : path_(std::move(path)), tags_(std::move(tags)) {
  MDL_CHECK(!path_.empty(), "SaveCheckpoint: no path");
}

void SaveCheckpoint::on_epoch_checkpoint(TrainContext& c, const EpochRecord& r) {
  if (c.rank == 0)
    save_checkpoint(path_, *c.model, *c.optimizer, *c.scaler, r.epoch, tags_, c.schedule, c.callback_state);
}

BestTracker::BestTracker(const std::string& monitor, Mode mode, double min_delta, const char* who)
    : monitor_(monitor), max_(mode_is_max(mode, monitor)), min_delta_(min_delta) {
  check_metric_name(monitor, who);
  MDL_CHECK(min_delta >= 0 && std::isfinite(min_delta), who, ": min_delta must be a finite number >= 0, got ",
            min_delta);
}

void BestTracker::reset() { best_ = NAN, best_epoch_ = 0; }

bool BestTracker::improves(double v) const {
  if (!std::isfinite(v)) return false;
  if (best_epoch_ == 0) return true;
  return max_ ? v > best_ + min_delta_ : v < best_ - min_delta_;
}

void BestTracker::check_available(const TrainContext& c, const char* who) const {
  check_monitor_available(c, monitor_, who);
}

CheckpointBest::CheckpointBest(std::string path, std::string monitor, Mode mode)
    : path_(std::move(path)), best_(monitor, mode, 0.0, "CheckpointBest") {
  MDL_CHECK(!path_.empty(), "CheckpointBest: no path");
}

// A resumed run goes on from the best its file holds (an earlier epoch of the same monitor), as
// Lightning keeps best_model_score: a worse epoch after the resume must not replace it. A run from
// epoch 1 starts afresh, as Keras's ModelCheckpoint does.
void CheckpointBest::on_train_begin(TrainContext& c) {
  best_.check_available(c, "CheckpointBest");
  if (c.first_epoch <= 1 || best_.best_epoch() > 0 || !std::filesystem::exists(path_)) return;
  const io::Metadata meta = io::read_safetensors(path_).metadata;
  auto get = [&](const char* key) {
    const std::string* v = io::find_metadata(meta, key);
    return v ? *v : std::string();
  };
  if (get("monitor") != best_.monitor()) return;
  char* end = nullptr;
  const std::string value = get("value"), epoch = get("epoch");
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v)) return;
  const long long e = std::strtoll(epoch.c_str(), &end, 10);
  if (epoch.empty() || *end != '\0' || e < 1 || e >= c.first_epoch) return;
  best_.set(v, e);
}

void CheckpointBest::on_epoch_end(TrainContext& c, const EpochRecord& r) {
  const double v = metric_value(r, best_.monitor());
  if (!best_.improves(v)) return;
  best_.set(v, r.epoch);
  char value[40];
  std::snprintf(value, sizeof value, "%.9g", v);
  io::save_safetensors(path_, c.model->state_dict(),
                       {{"epoch", std::to_string(r.epoch)}, {"monitor", best_.monitor()}, {"value", value}});
  checkpoint_files::remove_abandoned(path_);  // the temporaries of killed writers of this file
  ++saves_;
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : o_(std::move(options)), best_(o_.monitor, o_.mode, o_.min_delta, "EarlyStopping") {
  MDL_CHECK(o_.patience >= 0, "EarlyStopping: patience must be >= 0, got ", o_.patience);
}

void EarlyStopping::on_train_begin(TrainContext& c) {
  best_.check_available(c, "EarlyStopping");
  best_.reset();
  wait_ = stopped_epoch_ = last_epoch_ = 0;
  best_weights_.clear();
  restored_ = false;
  const std::string key = "early_stopping." + o_.monitor + ".";
  if (!kept(c, key + "best_epoch")) return;
  const int64_t best_epoch = kept_count(c, key + "best_epoch", c.first_epoch - 1, "EarlyStopping");
  if (best_epoch > 0) best_.set(kept_number(c, key + "best", "EarlyStopping"), best_epoch);
  wait_ = kept_count(c, key + "wait", c.first_epoch - 1, "EarlyStopping");
}

void EarlyStopping::on_epoch_end(TrainContext& c, const EpochRecord& r) {
  last_epoch_ = r.epoch;
  const double v = metric_value(r, o_.monitor);
  if (best_.improves(v)) {
    best_.set(v, r.epoch);
    wait_ = 0;
    if (o_.restore_best_weights) {
      best_weights_.clear();
      for (auto& [name, t] : c.model->state_dict()) best_weights_.emplace_back(name, t.detach().clone());
    }
  } else if (++wait_ >= o_.patience) {
    stopped_epoch_ = r.epoch;
    c.request_stop("EarlyStopping: " + o_.monitor + " did not improve for " + std::to_string(wait_) +
                   " epochs (best at epoch " + std::to_string(best_.best_epoch()) + ")");
  }
  const std::string key = "early_stopping." + o_.monitor + ".";
  c.keep_state(key + "best", exact(best_.best()));
  c.keep_state(key + "best_epoch", std::to_string(best_.best_epoch()));
  c.keep_state(key + "wait", std::to_string(wait_));
}

void EarlyStopping::on_train_end(TrainContext& c) {
  if (!o_.restore_best_weights || best_weights_.empty()) return;
  // The model holds the last epoch's weights, unless that epoch was abandoned (stop_now) or diverged.
  if (best_.best_epoch() == last_epoch_ && !c.abandon_epoch) return;
  c.model->load_state_dict(best_weights_);
  restored_ = true;
}

ReduceLROnPlateau::ReduceLROnPlateau(std::string monitor, optim::ReduceLROnPlateauOptions options, Mode mode)
    : monitor_(std::move(monitor)), options_(options) {
  check_metric_name(monitor_, "ReduceLROnPlateau");
  MDL_CHECK(options_.patience >= 0, "ReduceLROnPlateau: patience must be >= 0, got ", options_.patience);
  options_.mode_max = mode_is_max(mode, monitor_);
}

void ReduceLROnPlateau::on_train_begin(TrainContext& c) {
  check_monitor_available(c, monitor_, "ReduceLROnPlateau");
  plateau_ = std::make_unique<optim::ReduceLROnPlateau>(*c.optimizer, options_);
  const std::string key = "plateau." + monitor_ + ".";
  if (!kept(c, key + "best")) return;
  const int64_t most = std::numeric_limits<int32_t>::max();
  plateau_->set_state({.best = kept_number(c, key + "best", "ReduceLROnPlateau"),
                       .bad_epochs = kept_count(c, key + "bad_epochs", most, "ReduceLROnPlateau"),
                       .cooldown_left = kept_count(c, key + "cooldown_left", most, "ReduceLROnPlateau")});
}

void ReduceLROnPlateau::on_epoch_end(TrainContext& c, const EpochRecord& r) {
  const double before = c.optimizer->lr();
  plateau_->step(metric_value(r, monitor_));
  if (c.optimizer->lr() < before) ++reductions_;
  const optim::ReduceLROnPlateau::State s = plateau_->state();
  const std::string key = "plateau." + monitor_ + ".";
  c.keep_state(key + "best", exact(s.best));
  c.keep_state(key + "bad_epochs", std::to_string(s.bad_epochs));
  c.keep_state(key + "cooldown_left", std::to_string(s.cooldown_left));
}

TimeToTarget::TimeToTarget(double target, std::string monitor) : target_(target), monitor_(std::move(monitor)) {
  check_metric_name(monitor_, "TimeToTarget");
  MDL_CHECK(target > 0 && target <= 1, "TimeToTarget: the target accuracy must be in (0, 1], got ", target);
}

void TimeToTarget::on_train_begin(TrainContext& c) {
  check_monitor_available(c, monitor_, "TimeToTarget");
  epoch_ = 0, seconds_ = NAN;
}

void TimeToTarget::on_epoch_end(TrainContext& c, const EpochRecord& r) {
  if (reached() || !(metric_value(r, monitor_) >= target_)) return;
  epoch_ = r.epoch, seconds_ = c.seconds();
  char text[120];
  std::snprintf(text, sizeof text, "TimeToTarget: %s reached %.4g at epoch %lld after %.2fs", monitor_.c_str(), target_,
                (long long)epoch_, seconds_);
  c.request_stop(text);
}

}  // namespace mdl::train
