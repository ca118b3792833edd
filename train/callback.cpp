// CallbackList's fan-out and the table of metrics callbacks monitor.
#include "train/callback.h"

#include "tensor/error.h"

namespace mdl::train {

void TrainContext::request_stop(std::string reason) {
  if (!stop) stop_reason = std::move(reason);
  stop = true;
}

void TrainContext::stop_now(std::string reason) {
  request_stop(std::move(reason));
  abandon_epoch = true;
}

void TrainContext::keep_state(const std::string& key, std::string value) {
  for (auto& [k, v] : callback_state)
    if (k == key) {
      v = std::move(value);
      return;
    }
  callback_state.emplace_back(key, std::move(value));
}

const std::string* TrainContext::kept_state(const std::string& key) const {
  return io::find_metadata(callback_state, key);
}

void CallbackList::train_begin(TrainContext& c) {
  for (auto& cb : items) cb->on_train_begin(c);
}
void CallbackList::epoch_begin(TrainContext& c) {
  for (auto& cb : items) cb->on_epoch_begin(c);
}
bool CallbackList::needs_step_totals(const TrainContext& c) {
  bool any = false;
  for (auto& cb : items) any = cb->needs_step_totals(c) || any;  // each is asked: some count their steps
  return any;
}
void CallbackList::step_end(TrainContext& c) {
  for (auto& cb : items) cb->on_step_end(c);
}
void CallbackList::epoch_end(TrainContext& c, const EpochRecord& r) {
  for (auto& cb : items) cb->on_epoch_end(c, r);
  for (auto& cb : items) cb->on_epoch_checkpoint(c, r);
}
void CallbackList::train_end(TrainContext& c) {
  for (auto& cb : items) cb->on_train_end(c);
}

namespace {
constexpr const char* kMetrics[] = {"loss", "accuracy", "val_loss", "val_accuracy", "val_macro_f1", "lr"};
}

void check_metric_name(const std::string& name, const char* who) {
  for (const char* m : kMetrics)
    if (name == m) return;
  MDL_FAIL(who, ": unknown metric '", name,
           "'; monitor one of loss, accuracy, val_loss, val_accuracy, val_macro_f1, lr");
}

double metric_value(const EpochRecord& r, const std::string& name) {
  if (name == "loss") return r.train_loss;
  if (name == "accuracy") return r.train_accuracy;
  if (name == "val_loss") return r.val_loss;
  if (name == "val_accuracy") return r.val_accuracy;
  if (name == "val_macro_f1") return r.val_macro_f1;
  if (name == "lr") return r.lr;
  check_metric_name(name, "metric_value");
  return NAN;
}

void check_monitor_available(const TrainContext& c, const std::string& name, const char* who) {
  MDL_CHECK(c.has_validation || name.rfind("val_", 0) != 0, who, ": monitors '", name,
            "', but the run has no validation data");
}

bool mode_is_max(Mode mode, const std::string& metric) {
  if (mode != Mode::Auto) return mode == Mode::Max;
  return metric.find("accuracy") != std::string::npos || metric.find("f1") != std::string::npos;
}

}  // namespace mdl::train
