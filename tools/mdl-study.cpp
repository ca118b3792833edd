// mdl-study: the experiment of the reports this project grew from, on Fashion-MNIST. A baseline
// training run, then the same run with one optimization after another, then all together; a
// table of time, loss, accuracy and F1 per configuration with each one's speedup over the
// baseline, CSV logs per run, and PNG plots. `make study` runs it; environment:
//   STUDY_EPOCHS (default 3), STUDY_SUBSET (training samples, default 20000; 0 = all 60000),
//   STUDY_MODELS (comma-separated zoo models, default cnn), STUDY_OUT (default reports).
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

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const int64_t epochs = std::max<int64_t>(1, env_int("STUDY_EPOCHS", 3));
  const int64_t subset = env_int("STUDY_SUBSET", 20000);
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
     << mdl::get_num_threads() << " threads. Written by `make study` (tools/mdl-study.cpp).\n\n";

  int status = 0;
  for (const std::string& model : models) {
    struct Run {
      Config config;
      TrainReport report;
    };
    std::vector<Run> runs;
    for (const Config& c : configs()) {
      if (c.cnn_only && model != "cnn") continue;
      TrainOptions o;
      o.model = model, o.epochs = epochs, o.subset = subset, o.progress = false, o.seed = 0;
      c.apply(o);
      o.log = (fs::path(out_dir) / "study" / (model + "_" + c.name + ".csv")).string();
      std::printf("\n== %s %s: %s\n", model.c_str(), c.name.c_str(), c.what.c_str());
      std::fflush(stdout);
      try {
        runs.push_back({c, mdl::train::run_training(o, stdout)});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "mdl-study: %s %s failed: %s\n", model.c_str(), c.name.c_str(), e.what());
        status = 1;
      }
    }
    if (runs.empty()) continue;

    auto train_seconds = [](const TrainReport& r) {
      double s = 0;
      for (const auto& e : r.epochs) s += e.seconds;
      return s;
    };
    const double base_time = train_seconds(runs[0].report);
    md << "## " << model << " (" << runs[0].report.parameters << " parameters)\n\n"
       << "| configuration | what | s/epoch | run s | speedup | data wait | train loss | train acc | val loss | val acc | val macro-F1 |\n"
       << "|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::vector<mdl::train::Series> train_loss, val_loss, val_acc;
    std::vector<std::string> labels;
    std::vector<double> totals;
    for (const Run& r : runs) {
      const auto& last = r.report.epochs.back();
      double wait = 0, per_epoch = 0;
      mdl::train::Series tl{r.config.name, {}, {}}, vl{r.config.name, {}, {}}, va{r.config.name, {}, {}};
      for (const auto& e : r.report.epochs) {
        wait += e.wait_fraction * e.seconds, per_epoch += e.seconds;
        tl.x.push_back(double(e.epoch)), tl.y.push_back(e.train_loss);
        vl.x.push_back(double(e.epoch)), vl.y.push_back(e.val_loss);
        va.x.push_back(double(e.epoch)), va.y.push_back(100 * e.val_accuracy);
      }
      md << "| " << r.config.name << " | " << r.config.what << " | "
         << fmt("%.1f", per_epoch / double(r.report.epochs.size())) << " | " << fmt("%.1f", r.report.total_seconds)
         << " | " << fmt("%.2fx", base_time / train_seconds(r.report)) << " | " << fmt("%.1f%%", 100 * wait / per_epoch)
         << " | " << fmt("%.4f", last.train_loss) << " | " << fmt("%.2f%%", 100 * last.train_accuracy) << " | "
         << fmt("%.4f", last.val_loss) << " | " << fmt("%.2f%%", 100 * last.val_accuracy) << " | "
         << fmt("%.4f", last.val_macro_f1) << " |\n";
      train_loss.push_back(tl), val_loss.push_back(vl), val_acc.push_back(va);
      labels.push_back(r.config.name), totals.push_back(train_seconds(r.report));
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
    md << "\ns/epoch: training time per epoch (data loading included, validation not); run s: the whole run's wall "
          "time; speedup: the baseline's training time over this configuration's.\n\n"
       << "![training loss](study/" << model << "_train_loss.png) ![validation accuracy](study/" << model
       << "_val_accuracy.png)\n![validation loss](study/" << model << "_val_loss.png) ![time](study/" << model
       << "_time.png)\n\nCSV logs: `study/" << model << "_<configuration>.csv`.\n\n";
  }
  md.close();
  std::printf("\nwrote %s\n", (fs::path(out_dir) / "study.md").string().c_str());
  return status;
}
