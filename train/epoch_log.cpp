// EpochLog: the CSV has one column per EpochRecord field, in the record's order.
#include "train/epoch_log.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "train/progress.h"

namespace mdl::train {

EpochLog::EpochLog(const std::string& csv_path, std::FILE* out, int64_t epochs, bool append)
    : out_(out), epochs_(epochs) {
  if (!csv_path.empty())
    csv_ = std::make_unique<CsvLog>(csv_path,
                                    std::vector<std::string>{"epoch", "train_loss", "train_accuracy", "val_loss",
                                                             "val_accuracy", "val_macro_f1", "seconds", "wait_fraction",
                                                             "samples_per_second", "lr", "skipped_steps", "peak_bytes"},
                                    append);
}

void EpochLog::write(const EpochRecord& r) {
  if (out_) {
    char val[96] = "no validation split";  // val_accuracy is NaN only without one (a diverged model's is a number)
    if (!std::isnan(r.val_accuracy))
      std::snprintf(val, sizeof val, "val loss %.4f acc %.2f%% macro-F1 %.4f", r.val_loss, 100 * r.val_accuracy,
                    r.val_macro_f1);
    std::fprintf(out_,
                 "epoch %lld/%lld: train loss %.4f acc %.2f%% | %s | %s, %.0f samples/s, data wait %.1f%%, lr %.3g%s\n",
                 (long long)r.epoch, (long long)epochs_, r.train_loss, 100 * r.train_accuracy, val,
                 format_seconds(r.seconds).c_str(), r.samples_per_second, 100 * r.wait_fraction, r.lr,
                 r.skipped_steps ? (", " + std::to_string(r.skipped_steps) + " skipped steps").c_str() : "");
  }
  if (csv_)
    csv_->row({r.epoch, r.train_loss, r.train_accuracy, r.val_loss, r.val_accuracy, r.val_macro_f1, r.seconds,
               r.wait_fraction, r.samples_per_second, r.lr, r.skipped_steps, r.peak_bytes});
}

}  // namespace mdl::train
