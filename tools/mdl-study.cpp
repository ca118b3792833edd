// mdl-study: the experiment of the reports this project grew from. A baseline training run, then
// the same run with one optimization after another, then all together, each repeated over several
// seeds; a table per data set, model and device of time per epoch, speedup over the baseline, time
// to a target validation accuracy, data wait, peak memory, accuracy and F1 (medians, with the
// min-max range over the seeds, a flag on speedups whose range reaches 1.0x, and whether each row
// bought what the reports measured), CSV logs per run, PNG plots and study/summary.csv.
// Two kinds of data set: Fashion-MNIST's IDX files, held in memory with nothing to decode (the
// rows are the training-step optimizations), and images decoded from files and augmented (random
// crop, flip) each epoch, where the input pipeline's rows (prefetch, workers, caches) have work to
// hide or save. The default decoded set is Fashion-MNIST exported once as PNG files.
// Beside AMP's price in time, its price in accuracy: per data set, model and device, the relative
// error of f16 and bf16 autocast against f32 in the logits and the gradients of the first training
// step, and the gradient values f16 underflows without the loss scaler (a table at the end, and
// study/amp_precision.csv, study/amp_precision_parameters.csv).
// `make study` runs it; tools/gpu_study.sh runs its GPU half. The STUDY_* environment variables
// steer it (tools/mdl_train/study_usage.cpp lists them, mdl-study --help prints them); it takes no
// other argument.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "data/export.h"
#include "data/idx.h"
#include "tensor/parallel.h"
#include "tools/mdl_train/cpu_amp_note.h"
#include "tools/mdl_train/precision_table.h"
#include "tools/mdl_train/study_plan.h"
#include "tools/mdl_train/study_report.h"
#include "tools/mdl_train/study_usage.h"

namespace {

namespace fs = std::filesystem;
using namespace mdl::train;

// Fashion-MNIST's first n training images (all when n is 0) and its 10,000 test images as an
// ImageFolder of PNGs under dir (train/, test/), written once: into a temporary folder renamed
// when complete, so an interrupted export is never mistaken for a finished one.
void export_png(const fs::path& dir, const std::string& root, int64_t n) {
  if (fs::is_directory(dir)) return;
  const fs::path tmp = dir.string() + ".partial";
  fs::remove_all(tmp);
  std::printf("exporting Fashion-MNIST as PNG files to %s\n", dir.string().c_str());
  std::fflush(stdout);
  mdl::data::ExportOptions opt;
  opt.limit = n > 0 ? n : -1;
  const auto& classes = mdl::data::FashionMNIST::classes();
  mdl::data::export_image_folder(mdl::data::FashionMNIST(root, true), (tmp / "train").string(), classes, opt);
  opt.limit = -1;
  mdl::data::export_image_folder(mdl::data::FashionMNIST(root, false), (tmp / "test").string(), classes, opt);
  fs::rename(tmp, dir);
}

// STUDY_DATA's entries as data sets, the PNG export made unless this is a dry run.
std::vector<StudyDataSet> data_sets(const StudySettings& s) {
  std::vector<StudyDataSet> sets;
  const int64_t samples = s.subset ? s.subset : 60000;
  const std::string fm = s.fashion_mnist_root == mdl::data::kFashionMnistRoot ? "fashion-mnist"
                                                                              : "fashion-mnist:" + s.fashion_mnist_root;
  for (const std::string& d : s.data) {
    const std::string kind = d.substr(0, d.find(':'));
    const std::string path = d.find(':') == std::string::npos ? "" : d.substr(d.find(':') + 1);
    if (d == "fashion-mnist") {
      sets.push_back(
          {"fashion-mnist", fm,
           "Fashion-MNIST in memory (IDX, " + std::to_string(samples) + " training samples, nothing to decode)", false,
           s.subset, samples});
    } else if (d == "png") {
      const fs::path dir = s.out_dir / ("fashion-mnist-png-" + std::to_string(samples));
      if (!s.dry_run) export_png(dir, s.fashion_mnist_root, s.subset);
      sets.push_back({"png", "imagefolder:" + dir.string(),
                      "Fashion-MNIST as PNG files (" + std::to_string(samples) +
                          " training images decoded every epoch, augmented)",
                      true, 0, samples});
    } else if ((kind == "imagefolder" || kind == "cifar10") && !path.empty()) {
      sets.push_back({kind, d, d + " (augmented)", true, s.subset, s.subset});
    } else {
      throw UsageError("mdl-study: STUDY_DATA entries are fashion-mnist, png, imagefolder:PATH or cifar10:PATH; got '" +
                       d + "'");
    }
  }
  return sets;
}

std::string machine_of(const std::string& device) {
  if (device == "cpu") return mdl::cpu::cpu_model_name();
  const char* gpu = std::getenv("STUDY_GPU_NAME");
  return gpu && *gpu ? gpu : "GPU " + device;
}

MeasuredEpochs measured_epochs(const std::string& summary) {
  MeasuredEpochs m;
  if (summary.empty()) return m;
  for (const SummaryRow& r : read_summary_csv(summary))
    if (!std::isnan(r.per_epoch.median)) m[measured_key(r.device, r.data, r.model, r.config)] = r.per_epoch.median;
  return m;
}

// The epochs each row took to its target in these summaries, where every seed reached it.
EpochsToTarget epochs_to_target(const std::vector<std::string>& summaries) {
  EpochsToTarget e;
  for (const std::string& path : summaries)
    if (!path.empty())
      for (const SummaryRow& r : read_summary_csv(path))
        if (r.seeds > 0 && r.reached == r.seeds && r.per_epoch.median > 0)
          e[target_key(r.data, r.model, r.config, r.target_percent)] = int64_t(
              std::ceil(r.to_target.median / r.per_epoch.median - 1e-6));
  return e;
}

// The runs and their estimated time, and nothing run.
void print_plan(const StudySettings& s, const std::vector<StudyDataSet>& sets, const std::vector<PlannedRun>& runs) {
  const MeasuredEpochs measured = measured_epochs(s.estimate_from);
  const EpochsToTarget to_target = epochs_to_target({s.estimate_from, s.compare});
  std::map<std::pair<std::string, int64_t>, double> rounds;  // (device, seed) -> seconds
  double total = 0;
  int64_t assumed = 0;
  for (const PlannedRun& r : runs) {
    bool from_measurement = false;
    const double sec = estimate_run_seconds(r, sets[r.set], s, measured, &from_measurement, to_target);
    assumed += !from_measurement;
    rounds[{r.device, r.seed}] += sec, total += sec;
    std::printf("%-6s %-14s %-10s %-18s seed %lld  ~%5.1f s%s\n", r.device.c_str(), sets[r.set].key.c_str(),
                r.model.c_str(), r.config.name.c_str(), (long long)r.seed, sec, from_measurement ? "" : " (assumed)");
  }
  std::printf("\n%zu runs, %lld epochs at most each, estimated %.0f s (%.1f min) in all%s", runs.size(),
              (long long)s.epochs, total, total / 60,
              !s.stop_at_target ? ""
              : to_target.empty()
                  ? " at most (every run for all its epochs; runs that reach their target stop sooner)"
                  : " (a run stops at its target after the epochs a summary's runs took, where one gives them)");
  if (assumed)
    std::printf("; %lld runs from assumed step costs (tools/mdl_train/study_plan.cpp)%s", (long long)assumed,
                s.estimate_from.empty() ? ", STUDY_ESTIMATE_FROM=summary.csv uses a run's measured epochs" : "");
  std::printf("\n");
  double elapsed = 0;
  for (const auto& [key, sec] : rounds) {
    elapsed += sec;
    std::printf("  %s seed %lld: %.0f s, done by %.0f s%s\n", key.first.c_str(), (long long)key.second, sec, elapsed,
                s.deadline_s > 0 && elapsed > s.deadline_s ? " (past STUDY_DEADLINE: its runs would be cut)" : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();  // the deadline counts the PNG export too
  StudySettings s;
  std::vector<StudyDataSet> sets;
  try {
    if (study_wants_help(std::vector<std::string>(argv + 1, argv + argc))) {
      std::printf("%s", study_usage().c_str());
      return 0;
    }
    s = study_settings_from_env();
    sets = data_sets(s);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mdl-study: %s\n", e.what());
    return 1;
  }
  const std::vector<PlannedRun> runs = plan_runs(s, sets);
  if (s.dry_run) {
    try {
      print_plan(s, sets, runs);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mdl-study: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  std::vector<SummaryRow> compared;
  if (!s.compare.empty()) try {
      compared = read_summary_csv(s.compare);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  fs::create_directories(s.out_dir / "study" / "orders");

  // (device, set, model, row) -> the row's runs, seed by seed.
  std::map<std::string, StudyRow> results;
  auto row_key = [](const std::string& device, size_t set, const std::string& model, const std::string& config) {
    return device + "|" + std::to_string(set) + "|" + model + "|" + config;
  };
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int status = 0;
  int64_t cut = 0;
  for (const PlannedRun& r : runs) {
    const StudyDataSet& set = sets[r.set];
    const std::string stem = (r.device == "cpu" ? "" : r.device + "_") + set.key + "_" + r.model;
    StudyRow& row = results[row_key(r.device, r.set, r.model, r.config.name)];
    row.config = r.config;
    if (s.deadline_s > 0 && elapsed() > s.deadline_s) {
      ++cut;
      continue;
    }
    TrainOptions o;
    o.data = set.data, o.augment = set.pipeline, o.subset = set.subset, o.device = r.device;
    o.model = r.model, o.epochs = s.epochs, o.progress = false, o.seed = uint64_t(r.seed);
    const int64_t target = (set.pipeline ? s.decoded_target : s.memory_target).for_model(r.model);
    if (s.stop_at_target && target > 0) o.target_accuracy = double(target) / 100;
    r.config.apply(o);
    const std::string run = stem + "_" + r.config.name + "_seed" + std::to_string(r.seed);
    o.log = (s.out_dir / "study" / (run + ".csv")).string();
    if (s.dump_order && r.config.name == "baseline" && !set.pipeline)
      o.dump_order = (s.out_dir / "study" / "orders" /
                      (set.key + "_" + r.model + "_seed" + std::to_string(r.seed) + ".order"))
                         .string();
    if (o.cache == "file") o.cache_dir = (s.out_dir / "study" / ("cache_" + run)).string();
    std::printf("\n== %s: %s, %s %s, seed %lld: %s (%.0f s into the study)\n", r.device.c_str(), set.key.c_str(),
                r.model.c_str(), r.config.name.c_str(), (long long)r.seed, r.config.what.c_str(), elapsed());
    std::fflush(stdout);
    try {
      if (!o.cache_dir.empty()) fs::remove_all(o.cache_dir);  // each file-cache run fills its own
      row.reports.push_back(run_training(o, stdout));
      row.seeds.push_back(r.seed);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mdl-study: %s %s %s %s seed %lld failed: %s\n", r.device.c_str(), set.key.c_str(),
                   r.model.c_str(), r.config.name.c_str(), (long long)r.seed, e.what());
      status = 1;
    }
    if (!o.cache_dir.empty()) fs::remove_all(o.cache_dir);
  }

  std::ofstream md(s.out_dir / "study.md");
  md << "# mdl optimization study\n\n"
     << s.epochs << (s.stop_at_target ? " epochs at most (a run stops at its target)" : " epochs")
     << ", batch 128, AdamW lr 1e-3, " << mdl::get_num_threads() << " CPU threads, " << s.seeds
     << (s.seeds == 1 ? " seed" : " seeds")
     << " per configuration, run seed by seed (every row's seed 0, then seed 1, ...); validation on the held-out "
        "split (Fashion-MNIST's 10,000 test images); commit "
     << s.commit << ". Written by tools/mdl-study.cpp.\n\n";
  if (cut)
    md << "**STUDY_DEADLINE (" << s.deadline_s << " s) stopped the study: " << cut << " of " << runs.size()
       << " runs did not start.** Each table's seeds column says how many ran.\n\n";
  std::vector<PrecisionRow> precision;
  std::map<std::string, std::vector<SummaryRow>> summary;  // by device
  for (const std::string& device : s.devices)
    for (size_t si = 0; si < sets.size(); ++si) {
      const StudyDataSet& set = sets[si];
      for (const std::string& model : set.pipeline ? s.decoded_models : s.memory_models) {
        std::vector<StudyRow> rows;
        for (const StudyConfig& c : table_configs(s, set, model, device)) {
          auto it = results.find(row_key(device, si, model, c.name));
          if (it != results.end() && !it->second.reports.empty()) rows.push_back(it->second);
        }
        const std::string stem = (device == "cpu" ? "" : device + "_") + set.key + "_" + model;
        if (rows.empty() || rows[0].config.name != "baseline") {
          md << "## " << set.title << ": " << model << " on " << device
             << "\n\nNo baseline run finished: no table.\n\n";
          continue;
        }
        // AMP's price in accuracy, at the first step of seed 0's run.
        if (s.deadline_s <= 0 || elapsed() <= s.deadline_s) try {
            TrainOptions o;
            o.data = set.data, o.augment = set.pipeline, o.subset = set.subset, o.device = device, o.model = model;
            std::printf("\n== %s: %s, %s: AMP's error against f32 at the first step\n", device.c_str(), set.key.c_str(),
                        model.c_str());
            std::fflush(stdout);
            precision.push_back({set.key, model, device, first_step_precision(o, {mdl::kF16, mdl::kBF16})});
          } catch (const std::exception& e) {
            std::fprintf(stderr, "mdl-study: %s %s %s AMP precision failed: %s\n", device.c_str(), set.key.c_str(),
                         model.c_str(), e.what());
            status = 1;
          }
        const int64_t target = (set.pipeline ? s.decoded_target : s.memory_target).for_model(model);
        const TableContext t{s.out_dir,
                             stem,
                             set.title + ": " + model + " on " + device,
                             device,
                             machine_of(device),
                             s.commit,
                             set.key,
                             model,
                             s.seeds,
                             target};
        for (SummaryRow& r : write_study_table(md, t, rows)) summary[device].push_back(r);
        // The +amp row's reason on the CPU: whether f16 can pay here at all.
        const bool amp_row = std::any_of(rows.begin(), rows.end(),
                                         [](const StudyRow& r) { return r.config.name == "+amp"; });
        if (device == "cpu" && amp_row) md << "AMP on this CPU: " << cpu_amp_note("f16") << ".\n\n";
      }
    }
  std::vector<SummaryRow> all;
  std::vector<std::vector<SummaryRow>> per_device;
  for (const std::string& d : s.devices) {
    all.insert(all.end(), summary[d].begin(), summary[d].end());
    per_device.push_back(summary[d]);
  }
  if (!compared.empty()) {
    std::map<std::string, std::vector<SummaryRow>> by_device;
    for (const SummaryRow& r : compared) by_device[r.device].push_back(r);
    for (auto& [d, rows] : by_device) {
      for (SummaryRow& r : rows) r.device = d + " (STUDY_COMPARE)";
      per_device.push_back(rows);
    }
  }
  if (per_device.size() > 1) write_side_by_side(md, per_device);
  if (!precision.empty()) {
    write_precision_table(md, precision, "study/amp_precision.csv", "study/amp_precision_parameters.csv");
    try {
      write_precision_csv(precision, (s.out_dir / "study" / "amp_precision.csv").string(),
                          (s.out_dir / "study" / "amp_precision_parameters.csv").string());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mdl-study: %s\n", e.what());
      status = 1;
    }
  }
  md.close();
  try {
    write_summary_csv((s.out_dir / "study" / "summary.csv").string(), all);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    status = 1;
  }
  std::printf("\nwrote %s and %s\n", (s.out_dir / "study.md").string().c_str(),
              (s.out_dir / "study" / "summary.csv").string().c_str());
  return status;
}
