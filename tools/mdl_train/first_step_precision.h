// AMP's price in accuracy at the start of a run: the model and the first training batch that
// run_training would build from the same options (the seed's initial weights, the loader's first
// batch), compared in f32 and under autocast by amp::precision_report with the cross-entropy loss.
#pragma once
#include <cstdint>
#include <vector>

#include "amp/precision_report.h"
#include "tensor/dtype.h"
#include "tools/mdl_train/options.h"

namespace mdl::train {

struct FirstStepPrecision {
  std::vector<amp::PrecisionReport> reports{};  // one per dtype asked for, in order
  int64_t batch = 0;                            // the first batch's samples
};

// Builds data and model from o (its amp, cache, workers and the like play no part) and reports
// each dtype (kF16, kBF16, kF32) on the device o names.
FirstStepPrecision first_step_precision(const TrainOptions& o, const std::vector<DType>& dtypes,
                                        const amp::PrecisionOptions& options = {});

}  // namespace mdl::train
