// mdl-study's tables, charts and summary CSV.
#include "tools/mdl_train/study_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "tensor/error.h"
#include "tools/mdl_train/plot.h"

namespace mdl::train {

namespace fs = std::filesystem;

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double train_seconds(const TrainReport& r) {
  double s = 0;
  for (const auto& e : r.epochs) s += e.seconds;
  return s;
}

// The training seconds until the first epoch whose validation accuracy reached `target` (a
// fraction); NaN when no epoch did.
double time_to_target(const TrainReport& r, double target) {
  double s = 0;
  for (const auto& e : r.epochs) {
    s += e.seconds;
    if (e.val_accuracy >= target) return s;
  }
  return NAN;
}

double peak_mib(const TrainReport& r) {
  int64_t peak = 0;
  for (const auto& e : r.epochs) peak = std::max(peak, e.peak_bytes);
  return double(peak) / (1 << 20);
}

// A number for the CSV: empty when NaN; %.6g keeps every figure the tables print.
std::string cell(double v) { return std::isnan(v) ? "" : fmt("%.6g", v); }

const char* const kColumns[] = {"device",        "machine",         "commit",          "data",
                                "model",         "config",          "seeds",           "planned_seeds",
                                "s_per_epoch",   "s_per_epoch_min", "s_per_epoch_max", "speedup",
                                "speedup_min",   "speedup_max",     "to_target_s",     "to_target_min",
                                "to_target_max", "reached",         "target_percent",  "data_wait_percent",
                                "peak_mib",      "peak_ratio",      "val_accuracy",    "verdict"};
constexpr size_t kColumnCount = sizeof kColumns / sizeof kColumns[0];

// Free text in a CSV cell: no commas, quotes or line breaks, so that a plain split reads it back.
std::string plain(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '"' || c == '\n' || c == '\r') c = ';';
  return s;
}

}  // namespace

Spread spread_of(std::vector<double> v) {
  Spread s;
  std::erase_if(v, [](double x) { return std::isnan(x); });
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.lo = v.front(), s.hi = v.back(), s.n = int64_t(n);
  return s;
}

std::string spread_str(const char* f, const Spread& s) {
  if (s.n == 0) return "-";
  std::string out = fmt(f, s.median);
  if (s.n > 1) out += " (" + fmt(f, s.lo) + "-" + fmt(f, s.hi) + ")";
  return out;
}

std::string study_verdict(Expect expect, const Spread& speedup, double peak_ratio, bool is_baseline) {
  if (is_baseline || expect == Expect::Nothing) return "";
  if (expect == Expect::LessMemory) {
    if (std::isnan(peak_ratio)) return "no memory figure";
    return (peak_ratio < 0.95 ? "holds: peak memory " : "does not hold: peak memory ") + fmt("%.2fx", peak_ratio);
  }
  if (speedup.n == 0) return "";
  const std::string one = speedup.n == 1 ? " (one seed)" : "";
  if (speedup.n > 1 && speedup.lo <= 1.0 && speedup.hi >= 1.0) return "within noise";
  return (speedup.median > 1.0 ? "holds: " : "does not hold: ") + fmt("%.2fx", speedup.median) + one;
}

std::vector<SummaryRow> write_study_table(std::ostream& md, const TableContext& t, const std::vector<StudyRow>& rows) {
  MDL_CHECK(!rows.empty() && rows[0].config.name == "baseline" && !rows[0].reports.empty(),
            "mdl-study: a table needs its baseline first");
  const StudyRow& base = rows[0];
  const double target = double(t.target_percent) / 100;
  const double base_peak = spread_of([&] {
                             std::vector<double> p;
                             for (const auto& r : base.reports) p.push_back(peak_mib(r));
                             return p;
                           }())
                               .median;
  md << "## " << t.heading << " (" << base.reports[0].parameters << " parameters)\n\n"
     << "| configuration | what | seeds | s/epoch | speedup | to " << t.target_percent
     << "% (s) | data wait | peak MiB "
     << "| val acc | val macro-F1 | the reports' finding |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::vector<SummaryRow> summary;
  std::vector<Series> train_loss, val_loss, val_acc;
  std::vector<std::string> labels, noise;
  std::vector<double> totals;
  for (const StudyRow& r : rows) {
    std::vector<double> per_epoch, speedup, to_target, wait, peak, vacc, vf1;
    for (size_t i = 0; i < r.reports.size(); ++i) {
      const TrainReport& rep = r.reports[i];
      double w = 0;
      for (const auto& e : rep.epochs) w += e.wait_fraction * e.seconds;
      const double secs = train_seconds(rep);
      per_epoch.push_back(secs / double(rep.epochs.size()));
      // Against the same seed's baseline, run in the same round of the study. Runs of different
      // lengths (one stopped at its target) compare their epoch times.
      for (size_t b = 0; b < base.reports.size(); ++b)
        if (base.seeds[b] == r.seeds[i]) {
          const TrainReport& br = base.reports[b];
          speedup.push_back(br.epochs.size() == rep.epochs.size()
                                ? train_seconds(br) / secs
                                : train_seconds(br) / double(br.epochs.size()) / per_epoch.back());
        }
      to_target.push_back(time_to_target(rep, target));
      wait.push_back(100 * w / secs), peak.push_back(peak_mib(rep));
      vacc.push_back(100 * rep.epochs.back().val_accuracy), vf1.push_back(rep.epochs.back().val_macro_f1);
    }
    SummaryRow s;
    s.device = t.device, s.machine = t.machine, s.commit = t.commit, s.data = t.data, s.model = t.model;
    s.config = r.config.name;
    s.seeds = int64_t(r.reports.size()), s.planned_seeds = t.planned_seeds;
    s.per_epoch = spread_of(per_epoch), s.speedup = spread_of(speedup), s.to_target = spread_of(to_target);
    s.reached = s.to_target.n, s.target_percent = t.target_percent;
    s.wait_percent = spread_of(wait).median, s.peak_mib = spread_of(peak).median,
    s.val_accuracy = spread_of(vacc).median;
    s.peak_ratio = base_peak > 0 ? s.peak_mib / base_peak : NAN;
    const bool is_base = &r == &rows[0];
    s.verdict = study_verdict(r.config.expect, s.speedup, s.peak_ratio, is_base);
    if (!is_base && s.speedup.n > 1 && s.speedup.lo <= 1.0 && s.speedup.hi >= 1.0) noise.push_back(r.config.name);
    std::string reached = spread_str("%.1f", s.to_target);
    if (s.reached < s.seeds)
      reached += " (" + std::to_string(s.seeds - s.reached) + " of " + std::to_string(s.seeds) + " not reached)";
    const std::string seeds = std::to_string(s.seeds) +
                              (s.seeds < s.planned_seeds ? " of " + std::to_string(s.planned_seeds) : "");
    md << "| " << r.config.name << " | " << r.config.what << " | " << seeds << " | " << spread_str("%.2f", s.per_epoch)
       << " | " << (is_base ? "1.00x" : spread_str("%.2fx", s.speedup)) << " | " << reached << " | "
       << spread_str("%.1f%%", spread_of(wait)) << " | " << spread_str("%.0f", spread_of(peak)) << " | "
       << spread_str("%.2f%%", spread_of(vacc)) << " | " << spread_str("%.4f", spread_of(vf1)) << " | "
       << (s.verdict.empty() ? "-" : s.verdict) << " |\n";
    summary.push_back(s);
    // The charts show the first seed's run.
    const TrainReport& first = r.reports[0];
    Series tl{r.config.name, {}, {}}, vl{r.config.name, {}, {}}, va{r.config.name, {}, {}};
    for (const auto& e : first.epochs) {
      tl.x.push_back(double(e.epoch)), tl.y.push_back(e.train_loss);
      vl.x.push_back(double(e.epoch)), vl.y.push_back(e.val_loss);
      va.x.push_back(double(e.epoch)), va.y.push_back(100 * e.val_accuracy);
    }
    train_loss.push_back(tl), val_loss.push_back(vl), val_acc.push_back(va);
    labels.push_back(r.config.name), totals.push_back(train_seconds(first));
  }
  const fs::path dir = t.out_dir / "study";
  const std::string& stem = t.stem;
  line_chart((dir / (stem + "_train_loss.png")).string(), train_loss,
             {.title = stem + ": training loss", .x_label = "epoch", .y_label = "loss"});
  line_chart((dir / (stem + "_val_loss.png")).string(), val_loss,
             {.title = stem + ": validation loss", .x_label = "epoch", .y_label = "loss"});
  line_chart((dir / (stem + "_val_accuracy.png")).string(), val_acc,
             {.title = stem + ": validation accuracy", .x_label = "epoch", .y_label = "%"});
  bar_chart((dir / (stem + "_time.png")).string(), labels, totals,
            {.title = stem + ": training time (s)", .x_label = "seconds"});
  md << "\nEach cell: the median over the seeds, and (min-max). seeds: the runs that went into the row (\"k of n\" "
        "when the study's deadline stopped the rest). s/epoch: training time per epoch (data loading included, "
        "validation not); speedup: the same seed's baseline training time over this configuration's (per epoch, "
        "when one of the two stopped at its target); to "
     << t.target_percent << "%: training seconds until the first epoch whose validation accuracy reached "
     << t.target_percent
     << "%; data wait: the share of training time the step waited for its batch; peak MiB: the device "
        "allocator's high-water mark; the reports' finding: whether this row bought what the reports this study "
        "follows measured (time, or memory for gradient accumulation), \"within noise\" when the speedup's range "
        "reaches 1.0x.\n\n";
  if (t.planned_seeds > 1) {
    std::string names;
    for (const auto& n : noise) names += (names.empty() ? "" : ", ") + n;
    md << (noise.empty() ? std::string("No speedup range reaches 1.0x.")
                         : "Within noise (the speedup's range over the seeds reaches 1.0x): " + names + ".")
       << "\n\n";
  }
  md << "![training loss](study/" << stem << "_train_loss.png) ![validation accuracy](study/" << stem
     << "_val_accuracy.png)\n![validation loss](study/" << stem << "_val_loss.png) ![time](study/" << stem
     << "_time.png)\n\nCSV logs: `study/" << stem
     << "_<configuration>_seed<N>.csv`; the charts show the first seed.\n\n";
  return summary;
}

void write_summary_csv(const std::string& path, const std::vector<SummaryRow>& rows) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream f(tmp);
    MDL_CHECK(f.good(), "mdl-study: cannot write '", tmp, "'");
    for (size_t i = 0; i < kColumnCount; ++i) f << (i ? "," : "") << kColumns[i];
    f << "\n";
    for (const SummaryRow& r : rows) {
      const std::string cells[] = {plain(r.device),
                                   plain(r.machine),
                                   plain(r.commit),
                                   plain(r.data),
                                   plain(r.model),
                                   plain(r.config),
                                   std::to_string(r.seeds),
                                   std::to_string(r.planned_seeds),
                                   cell(r.per_epoch.median),
                                   cell(r.per_epoch.lo),
                                   cell(r.per_epoch.hi),
                                   cell(r.speedup.median),
                                   cell(r.speedup.lo),
                                   cell(r.speedup.hi),
                                   cell(r.to_target.median),
                                   cell(r.to_target.lo),
                                   cell(r.to_target.hi),
                                   std::to_string(r.reached),
                                   std::to_string(r.target_percent),
                                   cell(r.wait_percent),
                                   cell(r.peak_mib),
                                   cell(r.peak_ratio),
                                   cell(r.val_accuracy),
                                   plain(r.verdict)};
      static_assert(sizeof cells / sizeof cells[0] == kColumnCount);
      for (size_t i = 0; i < kColumnCount; ++i) f << (i ? "," : "") << cells[i];
      f << "\n";
    }
    f.flush();
    MDL_CHECK(f.good(), "mdl-study: writing '", tmp, "' failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  MDL_CHECK(!ec, "mdl-study: cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

std::vector<SummaryRow> read_summary_csv(const std::string& path) {
  std::ifstream f(path);
  MDL_CHECK(f.good(), "mdl-study: cannot read the summary '", path, "'");
  std::string line;
  std::getline(f, line);
  std::string header;
  for (size_t i = 0; i < kColumnCount; ++i) {
    if (i) header += ',';
    header += kColumns[i];
  }
  MDL_CHECK(line == header, "mdl-study: '", path, "' line 1 is not mdl-study's summary header");
  std::vector<SummaryRow> rows;
  for (int64_t n = 2; std::getline(f, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string v; std::getline(ss, v, ',');) c.push_back(v);
    if (!line.empty() && line.back() == ',') c.push_back("");
    MDL_CHECK(c.size() == kColumnCount, "mdl-study: '", path, "' line ", n, " has ", c.size(), " cells, not ",
              kColumnCount);
    auto num = [&](size_t i) {
      if (c[i].empty()) return double(NAN);
      char* end = nullptr;
      const double v = std::strtod(c[i].c_str(), &end);
      MDL_CHECK(*end == 0 && std::isfinite(v), "mdl-study: '", path, "' line ", n, ": ", kColumns[i], " '", c[i],
                "' is not a number");
      return v;
    };
    auto count = [&](size_t i) {
      const double v = num(i);
      MDL_CHECK(!std::isnan(v) && v >= 0 && v <= 1e9 && v == std::floor(v), "mdl-study: '", path, "' line ", n, ": ",
                kColumns[i], " '", c[i], "' is not a count");
      return int64_t(v);
    };
    auto spread = [&](size_t i, int64_t k) {
      return Spread{num(i), num(i + 1), num(i + 2), std::isnan(num(i)) ? 0 : k};
    };
    SummaryRow r;
    r.device = c[0], r.machine = c[1], r.commit = c[2], r.data = c[3], r.model = c[4], r.config = c[5];
    r.seeds = count(6), r.planned_seeds = count(7);
    r.per_epoch = spread(8, r.seeds), r.speedup = spread(11, r.seeds);
    r.reached = count(17), r.to_target = spread(14, r.reached), r.target_percent = count(18);
    r.wait_percent = num(19), r.peak_mib = num(20), r.peak_ratio = num(21), r.val_accuracy = num(22);
    r.verdict = c[23];
    rows.push_back(r);
  }
  return rows;
}

void write_side_by_side(std::ostream& md, const std::vector<std::vector<SummaryRow>>& per_device) {
  struct Key {
    std::string data, model, config;
  };
  std::vector<Key> keys;
  for (const auto& rows : per_device)
    for (const SummaryRow& r : rows)
      if (std::none_of(keys.begin(), keys.end(),
                       [&](const Key& k) { return k.data == r.data && k.model == r.model && k.config == r.config; }))
        keys.push_back({r.data, r.model, r.config});
  md << "## The devices side by side\n\ns/epoch, speedup over the same device's baseline (median, and min-max over "
        "the seeds) and whether the reports' finding holds there.\n\n";
  for (const auto& rows : per_device)
    if (!rows.empty())
      md << "- " << rows[0].device << ": " << rows[0].machine << ", commit " << rows[0].commit << ", "
         << rows[0].planned_seeds << (rows[0].planned_seeds == 1 ? " seed" : " seeds") << " planned\n";
  md << "\n| data set | model | configuration |";
  for (const auto& rows : per_device) {
    const std::string d = rows.empty() ? "?" : rows[0].device;
    md << " " << d << " s/epoch | " << d << " speedup | " << d << " finding |";
  }
  md << "\n|---|---|---|";
  for (size_t d = 0; d < per_device.size(); ++d) md << "---|---|---|";
  md << "\n";
  for (const Key& k : keys) {
    md << "| " << k.data << " | " << k.model << " | " << k.config << " |";
    for (const auto& rows : per_device) {
      const auto it = std::find_if(rows.begin(), rows.end(), [&](const SummaryRow& r) {
        return r.data == k.data && r.model == k.model && r.config == k.config;
      });
      if (it == rows.end()) {
        md << " - | - | - |";
        continue;
      }
      md << " " << spread_str("%.2f", it->per_epoch) << " | "
         << (k.config == "baseline" ? std::string("1.00x") : spread_str("%.2fx", it->speedup)) << " | "
         << (it->verdict.empty() ? "-" : it->verdict) << " |";
    }
    md << "\n";
  }
  md << "\n";
}

}  // namespace mdl::train
