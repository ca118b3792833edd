// mdl-study's report: medians and ranges, the verdict on each row, the table built from training
// reports (speedups against the same seed's baseline), the summary CSV read back exactly, and a
// malformed summary refused with the file and line named.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tensor/error.h"
#include "tools/mdl_train/study_report.h"

using namespace mdl::train;
namespace fs = std::filesystem;

namespace {

TrainReport report(std::vector<double> seconds, std::vector<double> accuracy, int64_t peak) {
  TrainReport r;
  for (size_t i = 0; i < seconds.size(); ++i) {
    EpochRecord e;
    e.epoch = int64_t(i) + 1, e.seconds = seconds[i], e.val_accuracy = accuracy[i], e.peak_bytes = peak;
    e.val_loss = 0.5, e.val_macro_f1 = 0.8, e.train_loss = 0.6, e.wait_fraction = 0.1;
    r.epochs.push_back(e);
  }
  r.parameters = 1234;
  return r;
}

// The in-memory row of that name (the test fails if there is none).
StudyConfig memory_row(const std::string& name) {
  for (const StudyConfig& c : memory_configs())
    if (c.name == name) return c;
  FAIL("no in-memory study row named " << name);
  return {};
}

fs::path scratch(const char* name) {
  const fs::path dir = fs::temp_directory_path() / ("mdl_study_report_" + std::to_string(::getpid())) / name;
  fs::create_directories(dir / "study");
  return dir;
}

}  // namespace

TEST_CASE("study report: median and range") {
  const Spread s = spread_of({3, 1, NAN, 2, 10});
  CHECK(s.n == 4);
  CHECK(s.median == 2.5);
  CHECK(s.lo == 1);
  CHECK(s.hi == 10);
  CHECK(spread_str("%.1f", s) == "2.5 (1.0-10.0)");
  CHECK(spread_str("%.1f", spread_of({4})) == "4.0");
  CHECK(spread_str("%.1f", spread_of({})) == "-");
}

TEST_CASE("study report: the verdict on a row") {
  CHECK(study_verdict(Expect::Faster, spread_of({1.3, 1.4, 1.5}), NAN, false) == "holds: 1.40x");
  CHECK(study_verdict(Expect::Faster, spread_of({0.6, 0.7}), NAN, false) == "does not hold: 0.65x");
  CHECK(study_verdict(Expect::Faster, spread_of({0.9, 1.2}), NAN, false) == "within noise");
  CHECK(study_verdict(Expect::Faster, spread_of({1.2}), NAN, false) == "holds: 1.20x (one seed)");
  CHECK(study_verdict(Expect::LessMemory, spread_of({0.5}), 0.4, false) == "holds: peak memory 0.40x");
  CHECK(study_verdict(Expect::LessMemory, spread_of({0.5}), 1.0, false) == "does not hold: peak memory 1.00x");
  CHECK(study_verdict(Expect::Nothing, spread_of({2.0}), NAN, false).empty());
  CHECK(study_verdict(Expect::Faster, spread_of({1.0}), NAN, true).empty());
}

TEST_CASE("study report: a table from reports, speedups per seed, and the summary read back") {
  const fs::path dir = scratch("table");
  StudyRow base{memory_configs()[0],
                {report({2, 2}, {0.80, 0.91}, 100 << 20), report({3, 3}, {0.85, 0.88}, 100 << 20)},
                {0, 1}};
  StudyConfig amp = memory_row("+amp");
  // Seed 1 ran first here: each speedup must pair with its own seed's baseline (6/3 and 4/2).
  StudyRow fast{amp, {report({1.5, 1.5}, {0.90, 0.92}, 60 << 20), report({1, 1}, {0.70, 0.92}, 60 << 20)}, {1, 0}};
  StudyConfig accum = memory_row("+grad-accum");
  StudyRow small{accum, {report({4}, {0.95}, 30 << 20)}, {0}};  // stopped at its target after one epoch
  const TableContext t{dir, "fashion-mnist_cnn", "heading", "cuda", "H200", "abc123", "fashion-mnist", "cnn", 2, 90};
  std::ostringstream md;
  const std::vector<SummaryRow> rows = write_study_table(md, t, {base, fast, small});
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].speedup.n == 2);
  CHECK(rows[1].speedup.median == doctest::Approx(2.0));
  CHECK(rows[1].speedup.lo == doctest::Approx(2.0));
  CHECK(rows[1].verdict == "holds: 2.00x");
  // Seed 0's +amp reached 90% in its first epoch (0.90), after 1.5 s; seed 1's in its second, after 2 s.
  CHECK(rows[1].to_target.median == doctest::Approx(1.75));
  CHECK(rows[1].reached == 2);
  // The baseline: seed 0 reached 90% after 4 s, seed 1 never did.
  CHECK(rows[0].reached == 1);
  CHECK(md.str().find("| 4.0 (1 of 2 not reached) |") != std::string::npos);
  // One epoch against the baseline's two: the epoch times compare, 2 s / 4 s.
  CHECK(rows[2].speedup.median == doctest::Approx(0.5));
  CHECK(rows[2].peak_ratio == doctest::Approx(0.3));
  CHECK(rows[2].verdict == "holds: peak memory 0.30x");
  CHECK(md.str().find("| +grad-accum | each batch") != std::string::npos);
  CHECK(md.str().find("| 1 of 2 |") != std::string::npos);  // a row with fewer seeds than planned says so
  for (const char* chart : {"_train_loss.png", "_val_loss.png", "_val_accuracy.png", "_time.png"})
    CHECK(fs::file_size(dir / "study" / (std::string("fashion-mnist_cnn") + chart)) > 1000);

  const std::string csv = (dir / "study" / "summary.csv").string();
  write_summary_csv(csv, rows);
  const std::vector<SummaryRow> back = read_summary_csv(csv);
  REQUIRE(back.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(back[i].config == rows[i].config);
    CHECK(back[i].machine == "H200");
    CHECK(back[i].seeds == rows[i].seeds);
    CHECK(back[i].planned_seeds == 2);
    CHECK(back[i].per_epoch.median == doctest::Approx(rows[i].per_epoch.median));
    CHECK(back[i].speedup.hi == doctest::Approx(rows[i].speedup.hi));
    CHECK(back[i].reached == rows[i].reached);
    CHECK(back[i].verdict == rows[i].verdict);
  }
  CHECK(std::isnan(back[2].to_target.lo) == std::isnan(rows[2].to_target.lo));

  std::ostringstream side;
  std::vector<SummaryRow> cpu = back;
  for (SummaryRow& r : cpu) r.device = "cpu";
  cpu.pop_back();
  write_side_by_side(side, {back, cpu});
  CHECK(
      side.str().find("| fashion-mnist | cnn | +amp | 1.25 (1.00-1.50) | 2.00x (2.00x-2.00x) | holds: 2.00x | 1.25") !=
      std::string::npos);
  CHECK(side.str().find("| +grad-accum | 4.00 | 0.50x | holds: peak memory 0.30x | - | - | - |") != std::string::npos);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("study report: a malformed summary is refused, naming the file and the line") {
  const fs::path dir = scratch("malformed");
  const std::string path = (dir / "summary.csv").string();
  write_summary_csv(path, {});
  std::string header;
  std::ifstream in(path);
  std::getline(in, header);
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("device,machine\ncpu,x\n");
  CHECK_THROWS_WITH_AS(read_summary_csv(path), doctest::Contains("line 1 is not mdl-study's summary header"),
                       mdl::Error);
  write(header + "\ncpu,x,c,d,m,baseline,1\n");
  CHECK_THROWS_WITH_AS(read_summary_csv(path), doctest::Contains("line 2 has 7 cells"), mdl::Error);
  write(header + "\ncpu,x,c,d,m,baseline,1,1,abc,,,,,,,,,0,90,,,,,\n");
  CHECK_THROWS_WITH_AS(read_summary_csv(path), doctest::Contains("line 2: s_per_epoch 'abc' is not a number"),
                       mdl::Error);
  write(header + "\ncpu,x,c,d,m,baseline,-3,1,1,,,,,,,,,0,90,,,,,\n");
  CHECK_THROWS_WITH_AS(read_summary_csv(path), doctest::Contains("seeds '-3' is not a count"), mdl::Error);
  write(header + "\ncpu,x,c,d,m,baseline,1,1,inf,,,,,,,,,0,90,,,,,\n");
  CHECK_THROWS_WITH_AS(read_summary_csv(path), doctest::Contains("is not a number"), mdl::Error);
  CHECK_THROWS_WITH_AS(read_summary_csv((dir / "none.csv").string()), doctest::Contains("cannot read the summary"),
                       mdl::Error);
  fs::remove_all(dir.parent_path());
}
