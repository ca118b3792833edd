// The record of each finished epoch: one line printed (training and validation loss, accuracy,
// macro-F1, time, throughput, data wait, lr, skipped steps) and, with --log, one CSV row.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "train/csv_log.h"
#include "train/epoch_record.h"

namespace mdl::train {

class EpochLog {
 public:
  // csv_path empty: no CSV; out null: nothing printed. epochs: the run's total, for "epoch 3/10".
  // append (a resumed run): the CSV keeps its earlier rows.
  EpochLog(const std::string& csv_path, std::FILE* out, int64_t epochs, bool append = false);
  void write(const EpochRecord& r);

 private:
  std::FILE* out_;
  int64_t epochs_;
  std::unique_ptr<CsvLog> csv_;
};

}  // namespace mdl::train
