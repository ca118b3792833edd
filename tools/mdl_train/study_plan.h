// mdl-study's plan: its rows (a configuration each, applied on top of the f32 baseline), its data
// sets, its settings from the environment, the runs in the order they go, and their estimated time.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tools/mdl_train/options.h"

namespace mdl::train {

// What the reports this study follows found a row to buy: time, or memory at no gain in time.
enum class Expect { Faster, LessMemory, Nothing };

struct StudyConfig {
  std::string name, what;
  std::function<void(TrainOptions&)> apply;
  bool cnn_only = false;   // a variant of SimpleCNN: no row for the other models
  bool conv_only = false;  // a convolution layout: no row for the MLP or the ViT
  bool cuda_only = false;  // only where batches cross to a GPU, or the step is a CUDA Graph
  Expect expect = Expect::Faster;
};

// The training-step optimizations on data held in memory, and the input pipeline's rows first on
// data decoded from files and augmented every epoch. Both start with "baseline" and end with "all".
std::vector<StudyConfig> memory_configs();
std::vector<StudyConfig> pipeline_configs();

// Whether a row runs for this model on this device ("cpu", "cuda", "cuda:1").
bool config_applies(const StudyConfig& c, const std::string& model, const std::string& device);

// Validation accuracy targets in percent: "90" for every model, "90,vit=85" with one model's own.
struct Targets {
  int64_t fallback = 0;
  std::map<std::string, int64_t> per_model;
  int64_t for_model(const std::string& model) const;
  std::string str() const;  // as parsed: "90, vit 85"
};
Targets parse_targets(const std::string& name, const std::string& text);  // throws UsageError naming `name`

struct StudyDataSet {
  std::string key;   // in file names and tables: fashion-mnist, png, imagefolder, cifar10
  std::string data;  // TrainOptions::data
  std::string title;
  bool pipeline = false;  // read per sample and augmented: the pipeline's rows
  int64_t subset = 0;     // TrainOptions::subset
  int64_t samples = 0;    // training samples an epoch reads (0: unknown until loaded)
};

struct StudySettings {
  int64_t epochs = 3, subset = 20000, seeds = 3;
  Targets memory_target{85, {}}, decoded_target{80, {}};
  bool stop_at_target = false;  // a run ends after the first epoch that reached its target
  std::vector<std::string> data{"fashion-mnist", "png"};
  std::vector<std::string> memory_models{"cnn"}, decoded_models{"mlp", "cnn"};
  std::vector<std::string> rows, decoded_rows;  // names to run beyond the baseline; empty: every row
  std::vector<std::string> devices;
  std::filesystem::path out_dir = "reports";
  std::string fashion_mnist_root;  // the IDX files
  double deadline_s = 0;           // no run starts later than this after the start; 0 = none
  bool dry_run = false, dump_order = false;
  std::string compare;        // another run's study/summary.csv, set beside this one's
  std::string estimate_from;  // a summary.csv whose s/epoch replace the assumed step costs
  std::string commit = "unknown";
};

// STUDY_* from the environment (study_usage.h lists them); throws UsageError on a bad value: a
// count out of its range, an unknown model, a row that no data set in use has.
StudySettings study_settings_from_env();

// The runs in order. Device by device; within a device seed-major (seed 0 of every data set, model
// and row, then seed 1, ...), so a deadline that stops the study leaves fewer seeds everywhere,
// never a model without any.
struct PlannedRun {
  std::string device;
  size_t set = 0;  // index into the data sets
  std::string model;
  StudyConfig config;
  int64_t seed = 0;
};
std::vector<PlannedRun> plan_runs(const StudySettings& s, const std::vector<StudyDataSet>& sets);

// The rows one (data set, model, device) table holds, in order: the baseline first.
std::vector<StudyConfig> table_configs(const StudySettings& s, const StudyDataSet& set, const std::string& model,
                                       const std::string& device);

// Estimated seconds of one run: epochs x (steps x the step's cost + decoding, when the row leaves it
// to the training thread) + a fixed start-up and validation cost. The step costs are assumptions
// written in study_plan.cpp (measured on the machines named there); `measured` (device kind, data
// key, model, row) -> s/epoch from an earlier run's summary replaces them where it has the row.
using MeasuredEpochs = std::map<std::string, double>;
std::string measured_key(const std::string& device, const std::string& data, const std::string& model,
                         const std::string& config);
// With runs that stop at their target: (data key, model, row, target %) -> the epochs an earlier
// summary's runs took to reach it, on any device (the training computes the same there), in place
// of every epoch.
using EpochsToTarget = std::map<std::string, int64_t>;
std::string target_key(const std::string& data, const std::string& model, const std::string& config,
                       int64_t target_percent);
double estimate_run_seconds(const PlannedRun& r, const StudyDataSet& set, const StudySettings& s,
                            const MeasuredEpochs& measured, bool* from_measurement = nullptr,
                            const EpochsToTarget& to_target = {});

}  // namespace mdl::train
