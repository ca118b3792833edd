// The AMP accuracy table and its CSV files: cells read from each report at the loss scales it names.
#include "tools/mdl_train/precision_table.h"

#include <cmath>
#include <cstdio>

#include "amp/amp_config.h"
#include "amp/grad_scaler.h"
#include "train/csv_log.h"

namespace mdl::train {
namespace {

const amp::ScalePrecision* at_scale(const amp::PrecisionReport& r, double scale) {
  for (const amp::ScalePrecision& s : r.at_scales)
    if (s.loss_scale == scale) return &s;
  return nullptr;
}

std::string cell(const char* format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string error_cell(double v) { return cell("%.2e", v); }
std::string percent_cell(const amp::ScalePrecision* s) {
  return s ? cell("%.3g%%", 100 * s->underflow_fraction) : std::string("-");
}

}  // namespace

double training_loss_scale(DType dtype) {
  return amp::AmpConfig{dtype}.loss_scaling() ? amp::GradScalerOptions{}.init_scale : 1.0;
}

void write_precision_table(std::ostream& md, const std::vector<PrecisionRow>& rows, const std::string& rows_csv,
                           const std::string& parameters_csv) {
  const double scaler = amp::GradScalerOptions{}.init_scale;
  const std::string scaler_text = cell("%.0f", scaler);
  md << "## AMP's price in accuracy\n\n"
     << "| data set | model | device | autocast | logits error | loss error | gradients' loss scale | gradient error, "
        "median | gradient error, max | underflow, loss scale 1 | underflow, loss scale "
     << scaler_text << " |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::vector<std::string> overflows;
  for (const PrecisionRow& row : rows)
    for (const amp::PrecisionReport& r : row.result.reports) {
      const double scale = training_loss_scale(r.dtype);
      const amp::ScalePrecision* trained = at_scale(r, scale);
      const std::string name = amp::AmpConfig{r.dtype}.name();
      md << "| " << row.data << " | " << row.model << " | " << row.device << " | " << name << " | "
         << error_cell(r.output_error) << " | " << error_cell(r.loss_error) << " | " << cell("%.0f", scale) << " | "
         << (trained ? error_cell(trained->median_error) : "-") << " | "
         << (trained ? error_cell(trained->max_error) : "-") << " | " << percent_cell(at_scale(r, 1.0)) << " | "
         << percent_cell(at_scale(r, scaler)) << " |\n";
      for (const amp::ScalePrecision& s : r.at_scales)
        if (s.nonfinite_fraction > 0)
          overflows.push_back(row.data + " " + row.model + " on " + row.device + ", " + name + " at loss scale " +
                              cell("%.0f", s.loss_scale) + ": " + cell("%.3g%%", 100 * s.nonfinite_fraction));
    }
  md << "\nEach row compares one forward and backward of the model on the first training batch of seed 0's run "
        "(initial weights, eval mode) under autocast with f32 from the same weights: the relative error ||AMP - f32|| "
        "/ ||f32|| of the logits, the loss and each parameter tensor's gradient (median and max over the tensors, at "
        "the loss scale training uses), and the share of gradient values nonzero in f32 that come out zero or below "
        "the dtype's smallest normal (f16: 2^-14, bf16: 2^-126) at loss scale 1 (no scaler) and "
     << scaler_text
     << " (the scaler's initial scale). Rounding alone zeroes a few values too (a ReLU or max-pool that decides "
        "otherwise): bf16, with f32's range, shows how many.\n\n";
  if (!overflows.empty()) {
    md << "Gradient values inf or NaN (a step the scaler would skip, halving its scale):";
    for (size_t i = 0; i < overflows.size(); ++i) md << (i ? "; " : " ") << overflows[i];
    md << ".\n\n";
  }
  md << "CSV: `" << rows_csv << "` (these rows, with the share of values exactly zero), `" << parameters_csv
     << "` (each parameter tensor, each loss scale).\n\n";
}

void write_precision_csv(const std::vector<PrecisionRow>& rows, const std::string& rows_path,
                         const std::string& parameters_path) {
  const double scaler = amp::GradScalerOptions{}.init_scale;
  CsvLog table(rows_path, {"data", "model", "device", "autocast", "batch", "logits_error", "loss_error",
                           "gradient_loss_scale", "gradient_error_median", "gradient_error_max", "underflow_scale_1",
                           "underflow_scale_" + cell("%.0f", scaler), "zero_scale_1",
                           "zero_scale_" + cell("%.0f", scaler), "nonfinite_scale_" + cell("%.0f", scaler)});
  CsvLog parameters(parameters_path, {"data", "model", "device", "autocast", "loss_scale", "parameter", "values",
                                      "nonzero", "relative_error", "underflowed", "zeroed", "nonfinite"});
  constexpr double kNaN = NAN;
  for (const PrecisionRow& row : rows)
    for (const amp::PrecisionReport& r : row.result.reports) {
      const std::string name = amp::AmpConfig{r.dtype}.name();
      const double scale = training_loss_scale(r.dtype);
      const amp::ScalePrecision *trained = at_scale(r, scale), *one = at_scale(r, 1.0), *scaled = at_scale(r, scaler);
      table.row({row.data, row.model, row.device, name, row.result.batch, r.output_error, r.loss_error, scale,
                 trained ? trained->median_error : kNaN, trained ? trained->max_error : kNaN,
                 one ? one->underflow_fraction : kNaN, scaled ? scaled->underflow_fraction : kNaN,
                 one ? one->zero_fraction : kNaN, scaled ? scaled->zero_fraction : kNaN,
                 scaled ? scaled->nonfinite_fraction : kNaN});
      for (const amp::ScalePrecision& s : r.at_scales)
        for (const amp::ParameterPrecision& p : s.parameters)
          parameters.row({row.data, row.model, row.device, name, s.loss_scale, p.name, p.values, p.nonzero, p.error,
                          p.underflowed, p.zeroed, p.nonfinite});
    }
}

}  // namespace mdl::train
