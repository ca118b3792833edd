// mdl-study's AMP accuracy table from the first step of a SimpleCNN run on 256 Fashion-MNIST
// images: f16 and bf16 reports, the markdown table's cells (each a finite, non-negative number),
// and its two CSV files.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "mdl.h"
#include "tools/mdl_train/first_step_precision.h"
#include "tools/mdl_train/precision_table.h"
#include "train/csv_log.h"

using namespace mdl;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mdl_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// The cells of a markdown table row "| a | b |".
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line.substr(1));
  for (std::string c; std::getline(s, c, '|');) out.push_back(c.substr(1, c.size() - 2));
  return out;
}

// A cell as a number ("1.23e-04", "0.5%"), or NaN when it is not one.
double number(std::string c) {
  if (!c.empty() && c.back() == '%') c.pop_back();
  char* end = nullptr;
  const double v = std::strtod(c.c_str(), &end);
  return !c.empty() && *end == '\0' ? v : NAN;
}

}  // namespace

TEST_CASE("precision table: SimpleCNN's first step in f16 and bf16, as markdown and CSV") {
  train::TrainOptions o;
  o.model = "cnn", o.subset = 256;
  const train::FirstStepPrecision result = train::first_step_precision(o, {kF16, kBF16});
  REQUIRE(result.reports.size() == 2);
  CHECK(result.batch == 128);
  const amp::PrecisionReport &f16 = result.reports[0], &bf16 = result.reports[1];
  CHECK(f16.dtype == kF16);
  CHECK(f16.output_error > 0);
  CHECK(bf16.output_error > f16.output_error);
  REQUIRE(f16.at_scales.size() == 2);
  CHECK(f16.at_scales[1].loss_scale == train::training_loss_scale(kF16));
  CHECK(train::training_loss_scale(kBF16) == 1.0);
  CHECK(f16.at_scales[1].underflow_fraction <= f16.at_scales[0].underflow_fraction);

  const std::vector<train::PrecisionRow> rows = {{"fashion-mnist", "cnn", "cpu", result}};
  std::ostringstream md;
  train::write_precision_table(md, rows, "study/amp_precision.csv", "study/amp_precision_parameters.csv");
  std::stringstream text(md.str());
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  REQUIRE(lines.size() > 5);
  CHECK(lines[0] == "## AMP's price in accuracy");
  const std::vector<std::string> header = cells(lines[2]);
  REQUIRE(header.size() == 11);
  CHECK(header[4] == "logits error");
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string> row = cells(lines[size_t(4 + r)]);
    REQUIRE(row.size() == 11);
    CHECK(row[3] == (r == 0 ? "f16" : "bf16"));
    for (size_t c = 4; c < row.size(); ++c) {
      CAPTURE(header[c]);
      CAPTURE(row[c]);
      const double v = number(row[c]);
      CHECK(std::isfinite(v));
      CHECK(v >= 0);
    }
  }
  CHECK(md.str().find("study/amp_precision_parameters.csv") != std::string::npos);

  const std::string rows_csv = temp_path("amp_precision.csv"), params_csv = temp_path("amp_precision_parameters.csv");
  train::write_precision_csv(rows, rows_csv, params_csv);
  const train::CsvTable table = train::read_csv(rows_csv), params = train::read_csv(params_csv);
  REQUIRE(table.rows.size() == 2);
  CHECK(std::stod(table.rows[0][size_t(table.column("logits_error"))]) == doctest::Approx(f16.output_error));
  CHECK(std::stod(table.rows[1][size_t(table.column("underflow_scale_1"))]) ==
        doctest::Approx(bf16.at_scales[0].underflow_fraction));
  const size_t tensors = f16.at_scales[0].parameters.size();
  CHECK(tensors == 8);  // SimpleCNN: two convs and two dense layers, each a weight and a bias
  CHECK(params.rows.size() == 2 * 2 * tensors);
  CHECK(params.column("relative_error") >= 0);
  std::remove(rows_csv.c_str());
  std::remove(params_csv.c_str());
}
