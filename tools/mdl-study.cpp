// mdl-study: the experiment of the reports this project grew from, on Fashion-MNIST. A baseline
// training run, then the same run with one optimization after another, then all together, each
// repeated over several seeds; a table per model of time per epoch, speedup over the baseline,
// time to a target validation accuracy, loss, accuracy and F1 (means, with the min-max range over
// the seeds, and a flag on speedups whose range reaches 1.0x), CSV logs per run and PNG plots.
// `make study` runs it; environment:
//   STUDY_EPOCHS (default 3), STUDY_SUBSET (training samples, default 20000; 0 = all 60000),
//   STUDY_MODELS (comma-separated zoo models, default cnn), STUDY_SEEDS (runs per row, default 3),
//   STUDY_TARGET (validation accuracy in %, default 85), STUDY_OUT (default reports).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tensor/parallel.h"
#include "train/options.h"
#include "train/plot.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace {

using mdl::train::TrainOptions;
using mdl::train::TrainReport;

struct Config {
  std::string name, what;
  std::function<void(TrainOptions&)> apply;
  bool cnn_only = false;  // a variant of SimpleCNN: no row for the other models
};

// The steps of the experiment, each on top of the baseline; "all" combines them.
std::vector<Config> configs() {
  auto cache = [](TrainOptions& o) { o.cache = "memory", o.prefetch = 4, o.workers = 1; };
  auto amp = [](TrainOptions& o) { o.amp = "f16"; };
  auto l2 = [](TrainOptions& o) { o.l2 = 1e-4; };
  auto accum = [](TrainOptions& o) { o.grad_accum = 4; };
  auto cosine = [](TrainOptions& o) { o.schedule = "cosine"; };
  auto separable = [](TrainOptions& o) {
    if (o.model == "cnn") o.model = "cnn-separable";
  };
  return {
      {"baseline", "f32, no cache, no prefetch, data loaded in the training thread", [](TrainOptions&) {}},
      {"+cache+prefetch", "memory cache, 1 loader thread, 4 batches prefetched", cache},
      {"+amp", "autocast f16 with a dynamic loss scaler", amp},
      {"+l2", "L2 penalty 1e-4 on the dense layers' weights", l2},
      {"+grad-accum", "each batch of 128 as 4 accumulated micro-batches of 32", accum},
      {"+cosine", "cosine learning-rate schedule over the run", cosine},
      {"+separable", "a lighter architecture: the 32->64 conv depthwise separable (cnn only)", separable, true},
      {"all", "every optimization above together",
       [=](TrainOptions& o) { cache(o), amp(o), l2(o), accum(o), cosine(o), separable(o); }},
  };
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end || n < 0) {
    std::fprintf(stderr, "mdl-study: %s must be a non-negative integer, got '%s'\n", name, v);
    std::exit(2);
  }
  return n;
}

std::string env_string(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The mean of v and, over more than one value, its range: "12.3 (11.9-12.8)".
std::string spread(const char* f, const std::vector<double>& v) {
  if (v.empty()) return "-";
  double sum = 0;
  for (double x : v) sum += x;
  std::string out = fmt(f, sum / double(v.size()));
  if (v.size() > 1) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    out += " (" + fmt(f, *lo) + "-" + fmt(f, *hi) + ")";
  }
  return out;
}

double train_seconds(const TrainReport& r) {
  double s = 0;
  for (const auto& e : r.epochs) s += e.seconds;
  return s;
}

// The training seconds until the first epoch whose validation accuracy reached `target` (a
// fraction), and that epoch; {NAN, 0} when no epoch did.
std::pair<double, int64_t> time_to_target(const TrainReport& r, double target) {
  double s = 0;
  for (const auto& e : r.epochs) {
    s += e.seconds;
    if (e.val_accuracy >= target) return {s, e.epoch};
  }
  return {NAN, 0};
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const int64_t epochs = std::max<int64_t>(1, env_int("STUDY_EPOCHS", 3));
  const int64_t subset = env_int("STUDY_SUBSET", 20000);
  const int64_t seeds = std::max<int64_t>(1, env_int("STUDY_SEEDS", 3));
  const int64_t target_percent = env_int("STUDY_TARGET", 85);
  if (target_percent > 100) {
    std::fprintf(stderr, "mdl-study: STUDY_TARGET is a validation accuracy in %%, at most 100, got %lld\n",
                 (long long)target_percent);
    return 2;
  }
  const double target = double(target_percent) / 100.0;
  const std::string out_dir = env_string("STUDY_OUT", "reports");
  std::vector<std::string> models;
  {
    const std::string list = env_string("STUDY_MODELS", "cnn");
    for (size_t a = 0; a <= list.size();) {
      size_t b = list.find(',', a);
      if (b == std::string::npos) b = list.size();
      if (b > a) models.push_back(list.substr(a, b - a));
      a = b + 1;
    }
  }
  fs::create_directories(fs::path(out_dir) / "study");
  std::ofstream md(fs::path(out_dir) / "study.md");
  md << "# mdl optimization study\n\nFashion-MNIST (" << (subset ? std::to_string(subset) : std::string("60000"))
     << " training samples, the 10,000 test images for validation), " << epochs << " epochs, batch 128, AdamW lr 1e-3, "
     << mdl::get_num_threads() << " threads, " << seeds << (seeds == 1 ? " seed" : " seeds")
     << " per configuration. Written by `make study` (tools/mdl-study.cpp).\n\n";

  int status = 0;
  for (const std::string& model : models) {
    struct Row {
      Config config;
      std::vector<TrainReport> reports;  // one per seed that ran
    };
    std::vector<Row> rows;
    for (const Config& c : configs()) {
      if (c.cnn_only && model != "cnn") continue;
      Row row{c, {}};
      for (int64_t seed = 0; seed < seeds; ++seed) {
        TrainOptions o;
        o.model = model, o.epochs = epochs, o.subset = subset, o.progress = false, o.seed = uint64_t(seed);
        c.apply(o);
        o.log =
            (fs::path(out_dir) / "study" / (model + "_" + c.name + "_seed" + std::to_string(seed) + ".csv")).string();
        std::printf("\n== %s %s, seed %lld: %s\n", model.c_str(), c.name.c_str(), (long long)seed, c.what.c_str());
        std::fflush(stdout);
        try {
          row.reports.push_back(mdl::train::run_training(o, stdout));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "mdl-study: %s %s seed %lld failed: %s\n", model.c_str(), c.name.c_str(),
                       (long long)seed, e.what());
          status = 1;
        }
      }
      if (!row.reports.empty()) rows.push_back(std::move(row));
    }
    if (rows.empty() || rows[0].config.name != "baseline") continue;

    const std::vector<TrainReport>& base = rows[0].reports;
    md << "## " << model << " (" << base[0].parameters << " parameters)\n\n"
       << "| configuration | what | s/epoch | speedup | to " << target_percent << "% (s) | epochs to " << target_percent
       << "% | data wait | val loss | val acc | val macro-F1 |\n"
       << "|---|---|---|---|---|---|---|---|---|---|\n";
    std::vector<mdl::train::Series> train_loss, val_loss, val_acc;
    std::vector<std::string> labels, noise;
    std::vector<double> totals;
    for (const Row& r : rows) {
      std::vector<double> per_epoch, speedup, to_target, to_epoch, wait, vloss, vacc, vf1;
      int64_t missed = 0;
      for (size_t i = 0; i < r.reports.size(); ++i) {
        const TrainReport& rep = r.reports[i];
        const auto& last = rep.epochs.back();
        double w = 0;
        for (const auto& e : rep.epochs) w += e.wait_fraction * e.seconds;
        const double secs = train_seconds(rep);
        per_epoch.push_back(secs / double(rep.epochs.size()));
        if (i < base.size()) speedup.push_back(train_seconds(base[i]) / secs);  // the same seed's baseline
        const auto [t, e] = time_to_target(rep, target);
        if (e > 0) to_target.push_back(t), to_epoch.push_back(double(e));
        else ++missed;
        wait.push_back(100 * w / secs);
        vloss.push_back(last.val_loss), vacc.push_back(100 * last.val_accuracy), vf1.push_back(last.val_macro_f1);
      }
      const bool noisy = speedup.size() > 1 && *std::min_element(speedup.begin(), speedup.end()) <= 1.0 &&
                         *std::max_element(speedup.begin(), speedup.end()) >= 1.0;
      if (noisy && &r != &rows[0]) noise.push_back(r.config.name);
      std::string reached = spread("%.1f", to_target);
      if (missed)
        reached += " (" + std::to_string(missed) + " of " + std::to_string(r.reports.size()) + " not reached)";
      md << "| " << r.config.name << " | " << r.config.what << " | " << spread("%.2f", per_epoch) << " | "
         << spread("%.2fx", speedup) << (noisy && &r != &rows[0] ? " within noise" : "") << " | " << reached << " | "
         << spread("%.1f", to_epoch) << " | " << spread("%.1f%%", wait) << " | " << spread("%.4f", vloss) << " | "
         << spread("%.2f%%", vacc) << " | " << spread("%.4f", vf1) << " |\n";
      // The charts show the first seed's run.
      const TrainReport& first = r.reports[0];
      mdl::train::Series tl{r.config.name, {}, {}}, vl{r.config.name, {}, {}}, va{r.config.name, {}, {}};
      for (const auto& e : first.epochs) {
        tl.x.push_back(double(e.epoch)), tl.y.push_back(e.train_loss);
        vl.x.push_back(double(e.epoch)), vl.y.push_back(e.val_loss);
        va.x.push_back(double(e.epoch)), va.y.push_back(100 * e.val_accuracy);
      }
      train_loss.push_back(tl), val_loss.push_back(vl), val_acc.push_back(va);
      labels.push_back(r.config.name), totals.push_back(train_seconds(first));
    }
    const fs::path dir = fs::path(out_dir) / "study";
    mdl::train::line_chart((dir / (model + "_train_loss.png")).string(), train_loss,
                           {.title = model + ": training loss", .x_label = "epoch", .y_label = "loss"});
    mdl::train::line_chart((dir / (model + "_val_loss.png")).string(), val_loss,
                           {.title = model + ": validation loss", .x_label = "epoch", .y_label = "loss"});
    mdl::train::line_chart((dir / (model + "_val_accuracy.png")).string(), val_acc,
                           {.title = model + ": validation accuracy", .x_label = "epoch", .y_label = "%"});
    mdl::train::bar_chart((dir / (model + "_time.png")).string(), labels, totals,
                          {.title = model + ": training time (s)", .x_label = "seconds"});
    md << "\nEach cell: the mean over the seeds, and (min-max). s/epoch: training time per epoch (data loading "
          "included, validation not); speedup: the same seed's baseline training time over this configuration's; "
          "to "
       << target_percent << "%: training seconds until the first epoch whose validation accuracy reached "
       << target_percent << "%, and that epoch.\n\n";
    if (seeds > 1)
      md << (noise.empty() ? std::string("No speedup range reaches 1.0x.")
                           : "Within noise (the speedup's range over the seeds reaches 1.0x): " +
                                 [&] {
                                   std::string s;
                                   for (const auto& n : noise) s += (s.empty() ? "" : ", ") + n;
                                   return s;
                                 }() +
                                 ".")
         << "\n\n";
    md << "![training loss](study/" << model << "_train_loss.png) ![validation accuracy](study/" << model
       << "_val_accuracy.png)\n![validation loss](study/" << model << "_val_loss.png) ![time](study/" << model
       << "_time.png)\n\nCSV logs: `study/" << model << "_<configuration>_seed<N>.csv`; the charts show seed 0.\n\n";
  }
  md.close();
  std::printf("\nwrote %s\n", (fs::path(out_dir) / "study.md").string().c_str());
  return status;
}
