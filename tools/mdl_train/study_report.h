// mdl-study's report: a table per data set, model and device (medians over the seeds with their
// ranges, time to target, data wait, peak memory, and whether the row bought what the reports this
// study follows found), its charts, the summary CSV that another run can set beside its own, and
// the last table that sets the devices side by side.
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "tools/mdl_train/run_training.h"
#include "tools/mdl_train/study_plan.h"

namespace mdl::train {

// The median of the values and their range; n = 0 and NaNs when there are none.
struct Spread {
  double median = NAN, lo = NAN, hi = NAN;
  int64_t n = 0;
};
Spread spread_of(std::vector<double> v);
// "12.3 (11.9-12.8)", the range only over more than one value; "-" when empty. `f` formats one number.
std::string spread_str(const char* f, const Spread& s);

struct StudyRow {
  StudyConfig config;
  std::vector<TrainReport> reports;  // one per seed that ran
  std::vector<int64_t> seeds;        // the seed of each report
};

// One row of study/summary.csv: the figures of one table row.
struct SummaryRow {
  std::string device, machine, commit, data, model, config;
  int64_t seeds = 0, planned_seeds = 0;
  Spread per_epoch, speedup, to_target;  // s/epoch; this row over the same seed's baseline; s to target
  int64_t reached = 0;                   // seeds that reached the target
  int64_t target_percent = 0;
  double wait_percent = NAN, peak_mib = NAN, val_accuracy = NAN, peak_ratio = NAN;
  std::string verdict;  // whether the row bought what the reports found: "holds", "within noise", ...
};

// Whether the row bought what `expect` says, from its speedup's (or peak memory's) median and range.
std::string study_verdict(Expect expect, const Spread& speedup, double peak_ratio, bool is_baseline);

struct TableContext {
  std::filesystem::path out_dir;
  std::string stem, heading, device, machine, commit, data, model;
  int64_t planned_seeds = 1, target_percent = 0;
};

// The table, its notes and four charts (study/STEM_*.png); rows[0] is the baseline.
std::vector<SummaryRow> write_study_table(std::ostream& md, const TableContext& t, const std::vector<StudyRow>& rows);

void write_summary_csv(const std::string& path, const std::vector<SummaryRow>& rows);
// Throws Error naming the file and line on anything that is not a summary this code wrote.
std::vector<SummaryRow> read_summary_csv(const std::string& path);

// (data set, model, row) down, each device's (or summary's) s/epoch, speedup and verdict across.
void write_side_by_side(std::ostream& md, const std::vector<std::vector<SummaryRow>>& per_device);

}  // namespace mdl::train
