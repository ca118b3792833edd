// mdl-study: the experiment of the reports this project grew from. A baseline training run, then
// the same run with one optimization after another, then all together, each repeated over several
// seeds; a table per data set and model of time per epoch, speedup over the baseline, time to a
// target validation accuracy, loss, accuracy and F1 (means, with the min-max range over the seeds,
// and a flag on speedups whose range reaches 1.0x), CSV logs per run and PNG plots.
// Two kinds of data set: Fashion-MNIST's IDX files, held in memory with nothing to decode (the
// rows are the training-step optimizations), and images decoded from files and augmented (random
// crop, flip) each epoch, where the input pipeline's rows (prefetch, workers, caches) have work to
// hide or save. The default decoded set is Fashion-MNIST exported once as PNG files.
// Beside AMP's price in time, its price in accuracy: per data set, model and device, the relative
// error of f16 and bf16 autocast against f32 in the logits and the gradients of the first training
// step, and the gradient values f16 underflows without the loss scaler (a table at the end, and
// study/amp_precision.csv, study/amp_precision_parameters.csv).
// `make study` runs it; environment:
//   STUDY_DATA (comma-separated: fashion-mnist, png, imagefolder:PATH, cifar10:PATH; default
//     fashion-mnist,png), STUDY_EPOCHS (default 3), STUDY_SUBSET (training samples, default 20000;
//     0 = all; for png, the samples exported), STUDY_MODELS (zoo models on fashion-mnist, default
//     cnn), STUDY_DECODED_MODELS (on the decoded sets, default mlp,cnn), STUDY_SEEDS (runs per
//     row, default 3), STUDY_TARGET (validation accuracy in %, default 85; STUDY_DECODED_TARGET for
//     the decoded, augmented sets, default 80), STUDY_OUT (default
//     reports; the PNG export goes to STUDY_OUT/fashion-mnist-png-N), STUDY_DEVICES (default cpu,
//     and cuda when a GPU is present: every table again on the GPU, with a +pin-memory row, and a
//     last table setting the devices side by side).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/export.h"
#include "data/idx.h"
#include "tensor/device.h"
#include "tensor/parallel.h"
#include "tools/mdl_train/cpu_amp_note.h"
#include "tools/mdl_train/options.h"
#include "tools/mdl_train/plot.h"
#include "tools/mdl_train/precision_table.h"
#include "train/progress.h"
#include "tools/mdl_train/run_training.h"

namespace {

namespace fs = std::filesystem;
using mdl::train::TrainOptions;
using mdl::train::TrainReport;

struct Config {
  std::string name, what;
  std::function<void(TrainOptions&)> apply;
  bool cnn_only = false;   // a variant of SimpleCNN: no row for the other models
  bool cuda_only = false;  // only where batches cross to a GPU
};

// The training-step optimizations, rows of both experiments.
void amp(TrainOptions& o) { o.amp = "f16"; }
void l2(TrainOptions& o) { o.l2 = 1e-4; }
void accum(TrainOptions& o) { o.grad_accum = 4; }
void separable(TrainOptions& o) {
  if (o.model == "cnn") o.model = "cnn-separable";
}

// Pinned batches need a loader thread to copy them ahead; on the CPU there is nothing to copy.
void pin(TrainOptions& o) { o.pin_memory = true, o.workers = std::max<int64_t>(o.workers, 1), o.prefetch = 4; }
void pin_on_gpu(TrainOptions& o) {
  if (o.device != "cpu") pin(o);
}

// The steps of the experiment on data held in memory, each on top of the baseline; "all" combines them.
std::vector<Config> memory_configs() {
  auto cache = [](TrainOptions& o) { o.cache = "memory", o.prefetch = 4, o.workers = 1; };
  auto cosine = [](TrainOptions& o) { o.schedule = "cosine"; };
  return {
      {"baseline", "f32, no cache, no prefetch, data loaded in the training thread", [](TrainOptions&) {}},
      {"+cache+prefetch", "memory cache, 1 loader thread, 4 batches prefetched", cache},
      {"+amp", "autocast f16 with a dynamic loss scaler", amp},
      {"+l2", "L2 penalty 1e-4 on the dense layers' weights", l2},
      {"+grad-accum", "each batch of 128 as 4 accumulated micro-batches of 32", accum},
      {"+cosine", "cosine learning-rate schedule over the run", cosine},
      {"+separable", "a lighter architecture: the 32->64 conv depthwise separable (cnn only)", separable, true},
      {"+pin-memory", "batches in page-locked memory, copied ahead on a side stream (1 loader thread, 4 ahead)", pin,
       false, true},
      {"all", "every optimization above together",
       [=](TrainOptions& o) { cache(o), amp(o), l2(o), accum(o), cosine(o), separable(o), pin_on_gpu(o); }},
  };
}

// The steps on data read from files and augmented every epoch: the input pipeline's first. Every
// row augments (random crop, flip), after any cache; a file-cache run starts from an empty cache.
std::vector<Config> pipeline_configs() {
  auto prefetch = [](TrainOptions& o) { o.workers = 1, o.prefetch = 4; };
  auto workers = [](TrainOptions& o) { o.workers = 2, o.prefetch = 4; };
  auto memory = [](TrainOptions& o) { o.cache = "memory"; };
  auto file = [](TrainOptions& o) { o.cache = "file"; };
  return {
      {"baseline", "f32; each batch read, decoded and augmented in the training thread", [](TrainOptions&) {}},
      {"+prefetch", "1 loader thread, 4 batches ahead of the training step", prefetch},
      {"+workers", "2 loader threads, 4 batches ahead", workers},
      {"+cache-memory", "decoded images kept in memory after epoch 1 (augmented afresh each epoch); no loader thread",
       memory},
      {"+cache-file", "decoded images written to a cache file in epoch 1, read back after; no loader thread", file},
      {"+amp", "autocast f16 with a dynamic loss scaler", amp},
      {"+l2", "L2 penalty 1e-4 on the dense layers' weights", l2},
      {"+grad-accum", "each batch of 128 as 4 accumulated micro-batches of 32", accum},
      {"+separable", "a lighter architecture: the 32->64 conv depthwise separable (cnn only)", separable, true},
      {"+pin-memory", "batches in page-locked memory, copied ahead on a side stream (1 loader thread, 4 ahead)", pin,
       false, true},
      {"all", "2 loader threads, memory cache and every training-step optimization above",
       [=](TrainOptions& o) { workers(o), memory(o), amp(o), l2(o), accum(o), separable(o), pin_on_gpu(o); }},
  };
}

// A data set of the study: what TrainOptions::data names, and how to run and describe it.
struct DataSet {
  std::string key;   // in file names
  std::string data;  // TrainOptions::data
  std::string title;
  bool pipeline = false;  // read per sample and augmented: the pipeline's rows
  int64_t subset = 0;     // TrainOptions::subset
};

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

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  for (size_t a = 0; a <= list.size();) {
    size_t b = list.find(',', a);
    if (b == std::string::npos) b = list.size();
    if (b > a) out.push_back(list.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

// Fashion-MNIST's first n training images (all when n is 0) and its 10,000 test images as an
// ImageFolder of PNGs under dir (train/, test/), written once: into a temporary folder renamed
// when complete, so an interrupted export is never mistaken for a finished one.
void export_png(const std::filesystem::path& dir, int64_t n) {
  namespace fs = std::filesystem;
  if (fs::is_directory(dir)) return;
  const fs::path tmp = dir.string() + ".partial";
  fs::remove_all(tmp);
  std::printf("exporting Fashion-MNIST as PNG files to %s\n", dir.string().c_str());
  std::fflush(stdout);
  mdl::data::ExportOptions opt;
  opt.limit = n > 0 ? n : -1;
  const auto& classes = mdl::data::FashionMNIST::classes();
  mdl::data::export_image_folder(mdl::data::FashionMNIST(mdl::data::kFashionMnistRoot, true), (tmp / "train").string(),
                                 classes, opt);
  opt.limit = -1;
  mdl::data::export_image_folder(mdl::data::FashionMNIST(mdl::data::kFashionMnistRoot, false), (tmp / "test").string(),
                                 classes, opt);
  fs::rename(tmp, dir);
}

// STUDY_DATA's entries as data sets; exits with status 2 on an unknown one.
std::vector<DataSet> data_sets(const std::string& list, int64_t subset, const std::filesystem::path& out_dir) {
  std::vector<DataSet> sets;
  const std::string samples = subset ? std::to_string(subset) : std::string("60000");
  for (const std::string& d : split_list(list)) {
    const std::string kind = d.substr(0, d.find(':'));
    const std::string path = d.find(':') == std::string::npos ? "" : d.substr(d.find(':') + 1);
    if (d == "fashion-mnist") {
      sets.push_back({"fashion-mnist", "fashion-mnist",
                      "Fashion-MNIST in memory (IDX, " + samples + " training samples, nothing to decode)", false,
                      subset});
    } else if (d == "png") {
      const auto dir = out_dir / ("fashion-mnist-png-" + samples);
      export_png(dir, subset);
      sets.push_back({"png", "imagefolder:" + dir.string(),
                      "Fashion-MNIST as PNG files (" + samples + " training images decoded every epoch, augmented)",
                      true, 0});
    } else if ((kind == "imagefolder" || kind == "cifar10") && !path.empty()) {
      sets.push_back({kind, d, d + " (augmented)", true, subset});
    } else {
      std::fprintf(stderr,
                   "mdl-study: STUDY_DATA entries are fashion-mnist, png, imagefolder:PATH or cifar10:PATH; got '%s'\n",
                   d.c_str());
      std::exit(2);
    }
  }
  return sets;
}

struct Row {
  Config config;
  std::vector<TrainReport> reports;  // one per seed that ran
  std::vector<int64_t> seeds;        // the seed of each report
};

// A row's headline cells, for the table that sets the devices side by side.
struct Headline {
  std::string per_epoch, speedup;
};

// One table, its charts and its notes: the rows of one model on one data set on one device.
std::vector<Headline> write_table(std::ostream& md, const fs::path& out_dir, const std::string& stem,
                                  const std::string& heading, const std::vector<Row>& rows, int64_t seeds,
                                  double target, int64_t target_percent) {
  const std::vector<TrainReport>& base = rows[0].reports;
  std::vector<Headline> headlines;
  md << "## " << heading << " (" << base[0].parameters << " parameters)\n\n"
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
      // Against the same seed's baseline, run just before this configuration.
      for (size_t b = 0; b < base.size(); ++b)
        if (rows[0].seeds[b] == r.seeds[i]) speedup.push_back(train_seconds(base[b]) / secs);
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
    if (missed) reached += " (" + std::to_string(missed) + " of " + std::to_string(r.reports.size()) + " not reached)";
    md << "| " << r.config.name << " | " << r.config.what << " | " << spread("%.2f", per_epoch) << " | "
       << spread("%.2fx", speedup) << (noisy && &r != &rows[0] ? " within noise" : "") << " | " << reached << " | "
       << spread("%.1f", to_epoch) << " | " << spread("%.1f%%", wait) << " | " << spread("%.4f", vloss) << " | "
       << spread("%.2f%%", vacc) << " | " << spread("%.4f", vf1) << " |\n";
    headlines.push_back(
        {spread("%.2f", per_epoch), spread("%.2fx", speedup) + (noisy && &r != &rows[0] ? " within noise" : "")});
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
  const fs::path dir = out_dir / "study";
  const std::string title = stem;
  mdl::train::line_chart((dir / (stem + "_train_loss.png")).string(), train_loss,
                         {.title = title + ": training loss", .x_label = "epoch", .y_label = "loss"});
  mdl::train::line_chart((dir / (stem + "_val_loss.png")).string(), val_loss,
                         {.title = title + ": validation loss", .x_label = "epoch", .y_label = "loss"});
  mdl::train::line_chart((dir / (stem + "_val_accuracy.png")).string(), val_acc,
                         {.title = title + ": validation accuracy", .x_label = "epoch", .y_label = "%"});
  mdl::train::bar_chart((dir / (stem + "_time.png")).string(), labels, totals,
                        {.title = title + ": training time (s)", .x_label = "seconds"});
  md << "\nEach cell: the mean over the seeds, and (min-max). s/epoch: training time per epoch (data loading "
        "included, validation not); speedup: the same seed's baseline training time over this configuration's; "
        "to "
     << target_percent << "%: training seconds until the first epoch whose validation accuracy reached "
     << target_percent << "%, and that epoch; data wait: the share of training time the step waited for its batch.\n\n";
  if (seeds > 1) {
    std::string names;
    for (const auto& n : noise) names += (names.empty() ? "" : ", ") + n;
    md << (noise.empty() ? std::string("No speedup range reaches 1.0x.")
                         : "Within noise (the speedup's range over the seeds reaches 1.0x): " + names + ".")
       << "\n\n";
  }
  md << "![training loss](study/" << stem << "_train_loss.png) ![validation accuracy](study/" << stem
     << "_val_accuracy.png)\n![validation loss](study/" << stem << "_val_loss.png) ![time](study/" << stem
     << "_time.png)\n\nCSV logs: `study/" << stem << "_<configuration>_seed<N>.csv`; the charts show seed 0.\n\n";
  return headlines;
}

}  // namespace

int main() {
  const int64_t epochs = std::max<int64_t>(1, env_int("STUDY_EPOCHS", 3));
  const int64_t subset = env_int("STUDY_SUBSET", 20000);
  const int64_t seeds = std::max<int64_t>(1, env_int("STUDY_SEEDS", 3));
  // Augmented data is learnt more slowly: its sets have their own target.
  const int64_t memory_target = env_int("STUDY_TARGET", 85), decoded_target = env_int("STUDY_DECODED_TARGET", 80);
  for (auto [name, t] : {std::pair{"STUDY_TARGET", memory_target}, std::pair{"STUDY_DECODED_TARGET", decoded_target}})
    if (t > 100) {
      std::fprintf(stderr, "mdl-study: %s is a validation accuracy in %%, at most 100, got %lld\n", name, (long long)t);
      return 2;
    }
  const fs::path out_dir = env_string("STUDY_OUT", "reports");
  const std::vector<std::string> memory_models = split_list(env_string("STUDY_MODELS", "cnn"));
  const std::vector<std::string> pipeline_models = split_list(env_string("STUDY_DECODED_MODELS", "mlp,cnn"));
  // The CPU, and the GPU when one is present.
  const std::vector<std::string> devices = split_list(
      env_string("STUDY_DEVICES", mdl::cuda::is_available() ? "cpu,cuda" : "cpu"));
  for (const std::string& d : devices) {
    try {
      const mdl::Device dev = mdl::parse_device(d);
      if (dev.is_cuda() && dev.index >= mdl::cuda::device_count())
        throw std::runtime_error("no GPU " + dev.str() + " here (" + std::to_string(mdl::cuda::device_count()) +
                                 " found" + (mdl::cuda::compiled() ? "" : "; this build has no CUDA") + ")");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mdl-study: STUDY_DEVICES entry '%s': %s\n", d.c_str(), e.what());
      return 2;
    }
  }
  fs::create_directories(out_dir / "study");
  std::vector<DataSet> sets;
  try {
    sets = data_sets(env_string("STUDY_DATA", "fashion-mnist,png"), subset, out_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mdl-study: %s\n", e.what());
    return 1;
  }
  std::ofstream md(out_dir / "study.md");
  md << "# mdl optimization study\n\n"
     << epochs << " epochs, batch 128, AdamW lr 1e-3, " << mdl::get_num_threads() << " CPU threads, " << seeds
     << (seeds == 1 ? " seed" : " seeds")
     << " per configuration; validation on the held-out split (Fashion-MNIST's 10,000 test images). Written by `make study` (tools/mdl-study.cpp).\n\n";

  // Side by side at the end: (data set, model, configuration) -> each device's headline.
  struct Line {
    std::string set, model, config;
    std::vector<Headline> per_device;
  };
  std::vector<Line> lines;
  std::vector<mdl::train::PrecisionRow> precision;
  int status = 0;
  for (size_t di = 0; di < devices.size(); ++di) {
    const std::string& device = devices[di];
    for (const DataSet& set : sets) {
      const std::vector<Config> configs = set.pipeline ? pipeline_configs() : memory_configs();
      for (const std::string& model : set.pipeline ? pipeline_models : memory_models) {
        const std::string stem = (device == "cpu" ? "" : device + "_") + set.key + "_" + model;
        // Seed by seed, every configuration in turn: a machine that speeds up or slows down over the
        // study then moves a seed's baseline with its configurations, and shows in the spread.
        std::vector<Row> rows;
        for (const Config& c : configs)
          if (!(c.cnn_only && model != "cnn") && !(c.cuda_only && device == "cpu")) rows.push_back({c, {}, {}});
        for (int64_t seed = 0; seed < seeds; ++seed)
          for (Row& row : rows) {
            const Config& c = row.config;
            TrainOptions o;
            o.data = set.data, o.augment = set.pipeline, o.subset = set.subset, o.device = device;
            o.model = model, o.epochs = epochs, o.progress = false, o.seed = uint64_t(seed);
            c.apply(o);
            const std::string run = stem + "_" + c.name + "_seed" + std::to_string(seed);
            o.log = (out_dir / "study" / (run + ".csv")).string();
            if (o.cache == "file") o.cache_dir = (out_dir / "study" / ("cache_" + run)).string();
            std::printf("\n== %s: %s, %s %s, seed %lld: %s\n", device.c_str(), set.key.c_str(), model.c_str(),
                        c.name.c_str(), (long long)seed, c.what.c_str());
            std::fflush(stdout);
            try {
              if (!o.cache_dir.empty()) fs::remove_all(o.cache_dir);  // each file-cache run fills its own
              row.reports.push_back(mdl::train::run_training(o, stdout));
              row.seeds.push_back(seed);
            } catch (const std::exception& e) {
              std::fprintf(stderr, "mdl-study: %s %s %s %s seed %lld failed: %s\n", device.c_str(), set.key.c_str(),
                           model.c_str(), c.name.c_str(), (long long)seed, e.what());
              status = 1;
            }
            if (!o.cache_dir.empty()) fs::remove_all(o.cache_dir);
          }
        // AMP's price in accuracy, at the first step of seed 0's run.
        try {
          TrainOptions o;
          o.data = set.data, o.augment = set.pipeline, o.subset = set.subset, o.device = device, o.model = model;
          std::printf("\n== %s: %s, %s: AMP's error against f32 at the first step\n", device.c_str(), set.key.c_str(),
                      model.c_str());
          std::fflush(stdout);
          precision.push_back({set.key, model, device, mdl::train::first_step_precision(o, {mdl::kF16, mdl::kBF16})});
        } catch (const std::exception& e) {
          std::fprintf(stderr, "mdl-study: %s %s %s AMP precision failed: %s\n", device.c_str(), set.key.c_str(),
                       model.c_str(), e.what());
          status = 1;
        }
        std::erase_if(rows, [](const Row& r) { return r.reports.empty(); });
        if (rows.empty() || rows[0].config.name != "baseline") continue;
        const int64_t target_percent = set.pipeline ? decoded_target : memory_target;
        const std::vector<Headline> h = write_table(md, out_dir, stem, set.title + ": " + model + " on " + device, rows,
                                                    seeds, double(target_percent) / 100.0, target_percent);
        // The +amp row's reason on the CPU: whether f16 can pay here at all.
        const bool amp_row = std::any_of(rows.begin(), rows.end(),
                                         [](const Row& r) { return r.config.name == "+amp"; });
        if (device == "cpu" && amp_row) md << "AMP on this CPU: " << mdl::train::cpu_amp_note("f16") << ".\n\n";
        for (size_t i = 0; i < rows.size(); ++i) {
          auto it = std::find_if(lines.begin(), lines.end(), [&](const Line& l) {
            return l.set == set.key && l.model == model && l.config == rows[i].config.name;
          });
          if (it == lines.end()) it = lines.insert(lines.end(), {set.key, model, rows[i].config.name, {}});
          it->per_device.resize(devices.size());
          it->per_device[di] = h[i];
        }
      }
    }
  }
  if (devices.size() > 1) {
    md << "## The devices side by side\n\ns/epoch and speedup over the same device's baseline (mean, and min-max over "
          "the seeds).\n\n| data set | model | configuration |";
    for (const std::string& d : devices) md << " " << d << " s/epoch | " << d << " speedup |";
    md << "\n|---|---|---|";
    for (size_t d = 0; d < devices.size(); ++d) md << "---|---|";
    md << "\n";
    for (const Line& l : lines) {
      md << "| " << l.set << " | " << l.model << " | " << l.config << " |";
      for (size_t d = 0; d < devices.size(); ++d) {
        const bool ran = d < l.per_device.size() && !l.per_device[d].per_epoch.empty();
        md << " " << (ran ? l.per_device[d].per_epoch : "-") << " | " << (ran ? l.per_device[d].speedup : "-") << " |";
      }
      md << "\n";
    }
    md << "\n";
  }
  if (!precision.empty()) {
    mdl::train::write_precision_table(md, precision, "study/amp_precision.csv", "study/amp_precision_parameters.csv");
    try {
      mdl::train::write_precision_csv(precision, (out_dir / "study" / "amp_precision.csv").string(),
                                      (out_dir / "study" / "amp_precision_parameters.csv").string());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mdl-study: %s\n", e.what());
      status = 1;
    }
  }
  md.close();
  std::printf("\nwrote %s\n", (out_dir / "study.md").string().c_str());
  return status;
}
