// mdl-study's table of AMP's price in accuracy, beside the time tables: one row per data set, model,
// device and autocast dtype, from first_step_precision; and the same figures as CSV files, one row
// per table row and one per parameter tensor.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "tools/mdl_train/first_step_precision.h"

namespace mdl::train {

struct PrecisionRow {
  std::string data, model, device;
  FirstStepPrecision result;  // reports at loss scales 1 and GradScalerOptions{}.init_scale
};

// The loss scale a training run's backward uses in dtype: GradScaler's initial scale for f16, 1 otherwise.
double training_loss_scale(DType dtype);

// "## AMP's price in accuracy", the table and the sentence under it; rows_csv and parameters_csv
// are the names the text gives the CSV files.
void write_precision_table(std::ostream& md, const std::vector<PrecisionRow>& rows, const std::string& rows_csv,
                           const std::string& parameters_csv);
// The table's figures, one CSV row per table row, at rows_path; one per parameter tensor and loss
// scale at parameters_path. Throws naming a file it cannot write.
void write_precision_csv(const std::vector<PrecisionRow>& rows, const std::string& rows_path,
                         const std::string& parameters_path);

}  // namespace mdl::train
