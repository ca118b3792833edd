// mdl-study's rows, settings and run order, and the time estimate a dry run prints.
#include "tools/mdl_train/study_plan.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "data/idx.h"
#include "tensor/device.h"

namespace mdl::train {

namespace {

void amp(TrainOptions& o) { o.amp = "f16"; }
void amp_bf16(TrainOptions& o) { o.amp = "bf16"; }
void l2(TrainOptions& o) { o.l2 = 1e-4; }
void accum(TrainOptions& o) { o.grad_accum = 4; }
void separable(TrainOptions& o) {
  if (o.model == "cnn") o.model = "cnn-separable";
}
bool conv_model(const std::string& model) { return model != "mlp" && model != "vit" && model != "gpt"; }
void channels_last(TrainOptions& o) {
  if (conv_model(o.model)) o.channels_last = true;
}
void cuda_graph(TrainOptions& o) {
  if (o.device != "cpu") o.cuda_graph = true;
}
// Pinned batches need a loader thread to copy them ahead; on the CPU there is nothing to copy.
void pin(TrainOptions& o) { o.pin_memory = true, o.workers = std::max<int64_t>(o.workers, 1), o.prefetch = 4; }
void pin_on_gpu(TrainOptions& o) {
  if (o.device != "cpu") pin(o);
}
// mdl-train's loader for a GPU run (options.h): several threads, several batches ahead, pinned.
void gpu_loader(TrainOptions& o) {
  o.workers = kGpuLoaderWorkers, o.prefetch = kGpuLoaderPrefetch;
  pin_on_gpu(o);
}

// The rows both kinds of data set have, written once.
const StudyConfig kLoaderRow{"+loader",  "4 loader threads, 8 batches ahead, pinned memory (mdl-train's GPU loader)",
                             gpu_loader, false,
                             false,      true};
const StudyConfig kAmpRow{"+amp", "autocast f16 with a dynamic loss scaler", amp};
const StudyConfig kAmpBf16Row{"+amp-bf16", "autocast bf16 (no loss scaler)", amp_bf16};
const StudyConfig kChannelsLastRow{"+channels-last", "conv weights and batches channels-last (NHWC)", channels_last,
                                   false, true};
// AMP and NHWC together, where cuDNN's NHWC kernels meet the tensor cores (in f32 they have none to feed).
const StudyConfig kAmpChannelsLastRow{"+amp+channels-last",
                                      "autocast f16 with a dynamic loss scaler, channels-last",
                                      [](TrainOptions& o) { amp(o), channels_last(o); },
                                      false,
                                      true,
                                      true};
const StudyConfig kGraphRow{
    "+cuda-graph", "the training step captured once as a CUDA Graph and replayed", cuda_graph, false, false, true};
const StudyConfig kL2Row{"+l2",          "L2 penalty 1e-4 on the dense layers' weights", l2, false, false, false,
                         Expect::Nothing};
const StudyConfig kAccumRow{
    "+grad-accum",     "each batch of 128 as 4 accumulated micro-batches of 32", accum, false, false, false,
    Expect::LessMemory};
const StudyConfig kSeparableRow{"+separable", "a lighter architecture: the 32->64 conv depthwise separable (cnn only)",
                                separable, true};
const StudyConfig kPinRow{
    "+pin-memory", "batches in page-locked memory, copied ahead on a side stream (1 loader thread, 4 ahead)",
    pin,           false,
    false,         true};

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

std::string env_string(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Ceilings far above any real study, so no estimate or loop count overflows.
constexpr int64_t kMaxStudyEpochs = 1'000'000, kMaxStudySeeds = 10'000, kMaxStudySamples = int64_t(1) << 40;
constexpr int64_t kMaxDeadlineSeconds = int64_t(1) << 32, kMaxCount = std::numeric_limits<int64_t>::max();

int64_t parse_count(const std::string& name, const std::string& v, int64_t min = 0, int64_t max = kMaxCount) {
  int64_t n = 0;
  const char* end = v.data() + v.size();
  const auto [p, ec] = std::from_chars(v.data(), end, n);
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (ec == std::errc::result_out_of_range && p == end)
    throw UsageError("mdl-study: " + name + " must be in " + range + ", got " + v + " (out of range)");
  if (v.empty() || ec != std::errc() || p != end)
    throw UsageError("mdl-study: " + name + " must be a whole number, got '" + v + "'");
  if (n < min || n > max) throw UsageError("mdl-study: " + name + " must be in " + range + ", got " + v);
  return n;
}

int64_t env_int(const char* name, int64_t fallback, int64_t min, int64_t max) {
  const std::string v = env_string(name, "");
  return v.empty() ? fallback : parse_count(name, v, min, max);
}

bool env_flag(const char* name) {
  const std::string v = env_string(name, "0");
  if (v != "0" && v != "1") throw UsageError(std::string("mdl-study: ") + name + " is 0 or 1, got '" + v + "'");
  return v == "1";
}

// Assumed milliseconds of one f32 training step of 128 samples; a dry run's estimate uses them where
// no earlier summary has the row. GPU: bench_cuda and mdl-train on an H100 (bench/log/2026-11-27-
// nvidia-h100.md; ResNet-18 there at 32x32, scaled to 28x28; the ViT not measured: a guess from the
// GPT step). CPU: mdl-train on a 2-core Zen 5 (bench/log/2026-11-29-amd-zen5.md).
double assumed_step_ms(bool cuda, const std::string& model) {
  struct Cost {
    const char* model;
    double cpu, cuda;
  };
  static const Cost costs[] = {
      {"mlp", 1.0, 0.4},       {"cnn", 16, 1.1},       {"cnn-separable", 18, 1.2}, {"vit", 31, 4},
      {"resnet18", 420, 12.5}, {"resnet50", 1400, 35}, {"efficientnet", 600, 20},  {"efficientnetv2", 600, 20}};
  for (const Cost& c : costs)
    if (model == c.model) return cuda ? c.cuda : c.cpu;
  return cuda ? 20 : 500;
}
// Decoding and augmenting one 28x28 PNG in the training thread (mdl-study's png set on a Zen 5).
constexpr double kDecodeMicroseconds = 30;
constexpr double kStartSeconds = 2;  // model set-up, the first epoch's warm-up, writing the log
constexpr int64_t kValidationSamples = 10000;

// STUDY_MODELS or STUDY_DECODED_MODELS: zoo models for image data, checked before any run.
std::vector<std::string> study_models(const char* name, const std::string& fallback) {
  std::vector<std::string> models = split_list(env_string(name, fallback));
  if (models.empty()) throw UsageError(std::string("mdl-study: ") + name + " names no model");
  for (const std::string& m : models) {
    if (m == "gpt")
      throw UsageError(std::string("mdl-study: ") + name + " names gpt, which needs text data; the study's are images");
    const auto& zoo = model_names();
    if (std::find(zoo.begin(), zoo.end(), m) == zoo.end()) {
      std::string all;
      for (const std::string& z : zoo)
        if (z != "gpt") all += (all.empty() ? "" : ", ") + z;
      throw UsageError(std::string("mdl-study: ") + name + " names no model '" + m + "'; the models are " + all);
    }
  }
  return models;
}

bool has_row(const std::vector<StudyConfig>& configs, const std::string& row) {
  return std::any_of(configs.begin(), configs.end(), [&](const StudyConfig& c) { return c.name == row; });
}

std::string row_names(const std::vector<StudyConfig>& configs) {
  std::string names;
  for (const StudyConfig& c : configs) names += (names.empty() ? "" : ", ") + c.name;
  return names;
}

// STUDY_ROWS and STUDY_DECODED_ROWS, each checked only where a data set of its kind is in use.
// STUDY_ROWS chooses the in-memory rows, and the decoded ones too where STUDY_DECODED_ROWS is
// unset: each of its names must be a row of a kind it applies to, and each kind runs the names
// that are its rows (the baseline alone where none is).
void choose_rows(StudySettings& s) {
  const bool memory = std::count(s.data.begin(), s.data.end(), "fashion-mnist") > 0;
  const bool decoded = std::any_of(s.data.begin(), s.data.end(),
                                   [](const std::string& d) { return d != "fashion-mnist"; });
  const std::vector<StudyConfig> memory_rows = memory_configs(), decoded_rows = pipeline_configs();
  const std::vector<std::string> rows = split_list(env_string("STUDY_ROWS", ""));
  const bool decoded_own = !env_string("STUDY_DECODED_ROWS", "").empty();
  const bool rows_apply = memory || (decoded && !decoded_own);
  for (const std::string& r : rows) {
    if (!rows_apply) break;
    const bool used = (memory && has_row(memory_rows, r)) || (decoded && !decoded_own && has_row(decoded_rows, r));
    if (used) continue;
    std::string known = memory ? "the in-memory sets' rows are " + row_names(memory_rows) : "";
    if (decoded && !decoded_own)
      known += (known.empty() ? "" : "; ") + std::string("the decoded sets' rows are ") + row_names(decoded_rows);
    throw UsageError("mdl-study: STUDY_ROWS names no row '" + r + "' of the data sets STUDY_DATA uses; " + known);
  }
  auto own = [&](const std::vector<StudyConfig>& configs) {
    std::vector<std::string> out;
    for (const std::string& r : rows)
      if (has_row(configs, r)) out.push_back(r);
    if (out.empty() && !rows.empty()) out.push_back("baseline");
    return out;
  };
  s.rows = own(memory_rows);
  if (!decoded_own) {
    s.decoded_rows = own(decoded_rows);
    return;
  }
  s.decoded_rows = split_list(env_string("STUDY_DECODED_ROWS", ""));
  if (decoded)
    for (const std::string& r : s.decoded_rows)
      if (!has_row(decoded_rows, r))
        throw UsageError("mdl-study: STUDY_DECODED_ROWS names no row '" + r + "'; its rows are " +
                         row_names(decoded_rows));
}

}  // namespace

std::vector<StudyConfig> memory_configs() {
  auto cache = [](TrainOptions& o) { o.cache = "memory", o.prefetch = 4, o.workers = 1; };
  auto cosine = [](TrainOptions& o) { o.schedule = "cosine"; };
  return {
      {"baseline", "f32, no cache, no prefetch, data loaded in the training thread", [](TrainOptions&) {}},
      {"+cache+prefetch", "memory cache, 1 loader thread, 4 batches prefetched", cache},
      kLoaderRow,
      kAmpRow,
      kAmpBf16Row,
      kChannelsLastRow,
      kAmpChannelsLastRow,
      kGraphRow,
      kL2Row,
      kAccumRow,
      {"+cosine", "cosine learning-rate schedule over the run", cosine, false, false, false, Expect::Nothing},
      kSeparableRow,
      kPinRow,
      {"all", "every optimization above together (f16 for AMP)",
       [=](TrainOptions& o) {
         cache(o), amp(o), channels_last(o), cuda_graph(o), l2(o), accum(o), cosine(o), separable(o), pin_on_gpu(o);
       }},
  };
}

// Every row augments (random crop, flip), after any cache; a file-cache run starts from an empty cache.
std::vector<StudyConfig> pipeline_configs() {
  auto prefetch = [](TrainOptions& o) { o.workers = 1, o.prefetch = 4; };
  auto workers = [](TrainOptions& o) { o.workers = 2, o.prefetch = 4; };
  auto memory = [](TrainOptions& o) { o.cache = "memory"; };
  auto file = [](TrainOptions& o) { o.cache = "file"; };
  return {
      {"baseline", "f32; each batch read, decoded and augmented in the training thread", [](TrainOptions&) {}},
      {"+prefetch", "1 loader thread, 4 batches ahead of the training step", prefetch},
      {"+workers", "2 loader threads, 4 batches ahead", workers},
      kLoaderRow,
      {"+cache-memory", "decoded images kept in memory after epoch 1 (augmented afresh each epoch); no loader thread",
       memory},
      {"+cache-file", "decoded images written to a cache file in epoch 1, read back after; no loader thread", file},
      kAmpRow,
      kAmpBf16Row,
      kChannelsLastRow,
      kGraphRow,
      kL2Row,
      kAccumRow,
      kSeparableRow,
      kPinRow,
      {"all", "loader threads, memory cache and every training-step optimization above (f16 for AMP)",
       [=](TrainOptions& o) {
         workers(o), memory(o), amp(o), channels_last(o), cuda_graph(o), l2(o), accum(o), separable(o);
         if (o.device != "cpu") gpu_loader(o);
       }},
  };
}

bool config_applies(const StudyConfig& c, const std::string& model, const std::string& device) {
  return !(c.cnn_only && model != "cnn") && !(c.conv_only && !conv_model(model)) && !(c.cuda_only && device == "cpu");
}

int64_t Targets::for_model(const std::string& model) const {
  const auto it = per_model.find(model);
  return it == per_model.end() ? fallback : it->second;
}

std::string Targets::str() const {
  std::string s = std::to_string(fallback) + "%";
  for (const auto& [model, t] : per_model) s += ", " + model + " " + std::to_string(t) + "%";
  return s;
}

Targets parse_targets(const std::string& name, const std::string& text) {
  Targets t{-1, {}};
  for (const std::string& entry : split_list(text)) {
    const size_t eq = entry.find('=');
    const std::string model = eq == std::string::npos ? "" : entry.substr(0, eq);
    const int64_t v = parse_count(name, eq == std::string::npos ? entry : entry.substr(eq + 1));
    if (v > 100) throw UsageError("mdl-study: " + name + " is a validation accuracy in %, at most 100, got " + entry);
    if (model.empty() && eq != std::string::npos)
      throw UsageError("mdl-study: " + name + " entry '" + entry + "' names no model");
    if (model.empty()) t.fallback = v;
    else t.per_model[model] = v;
  }
  if (t.fallback < 0)
    throw UsageError("mdl-study: " + name + " needs a target for every model (a bare number), got '" + text + "'");
  return t;
}

StudySettings study_settings_from_env() {
  StudySettings s;
  s.epochs = env_int("STUDY_EPOCHS", s.epochs, 1, kMaxStudyEpochs);
  s.subset = env_int("STUDY_SUBSET", s.subset, 0, kMaxStudySamples);
  s.seeds = env_int("STUDY_SEEDS", s.seeds, 1, kMaxStudySeeds);
  // Augmented data is learnt more slowly: its sets have their own target.
  s.memory_target = parse_targets("STUDY_TARGET", env_string("STUDY_TARGET", "85"));
  s.decoded_target = parse_targets("STUDY_DECODED_TARGET", env_string("STUDY_DECODED_TARGET", "80"));
  s.stop_at_target = env_flag("STUDY_STOP_AT_TARGET");
  s.data = split_list(env_string("STUDY_DATA", "fashion-mnist,png"));
  s.memory_models = study_models("STUDY_MODELS", "cnn");
  s.decoded_models = study_models("STUDY_DECODED_MODELS", "mlp,cnn");
  choose_rows(s);
  s.dry_run = env_flag("STUDY_DRY_RUN");
  s.devices = split_list(env_string("STUDY_DEVICES", s.dry_run || !cuda::is_available() ? "cpu" : "cpu,cuda"));
  for (const std::string& d : s.devices) {
    const Device dev = parse_device(d);  // throws on a malformed name
    if (!s.dry_run && dev.is_cuda() && dev.index >= cuda::device_count())
      throw UsageError("mdl-study: STUDY_DEVICES entry '" + d + "': no GPU " + dev.str() + " here (" +
                       std::to_string(cuda::device_count()) + " found" +
                       (cuda::compiled() ? "" : "; this build has no CUDA") + ")");
  }
  s.out_dir = env_string("STUDY_OUT", "reports");
  s.fashion_mnist_root = env_string("STUDY_FASHION_MNIST", data::kFashionMnistRoot);
  s.deadline_s = double(env_int("STUDY_DEADLINE", 0, 0, kMaxDeadlineSeconds));
  s.dump_order = env_flag("STUDY_DUMP_ORDER");
  s.compare = env_string("STUDY_COMPARE", "");
  s.estimate_from = env_string("STUDY_ESTIMATE_FROM", "");
  s.commit = env_string("STUDY_COMMIT", "unknown");
  return s;
}

std::vector<StudyConfig> table_configs(const StudySettings& s, const StudyDataSet& set, const std::string& model,
                                       const std::string& device) {
  std::vector<StudyConfig> out;
  const std::vector<std::string>& rows = set.pipeline ? s.decoded_rows : s.rows;
  for (const StudyConfig& c : set.pipeline ? pipeline_configs() : memory_configs()) {
    const bool chosen = c.name == "baseline" || rows.empty() ||
                        std::find(rows.begin(), rows.end(), c.name) != rows.end();
    if (chosen && config_applies(c, model, device)) out.push_back(c);
  }
  return out;
}

std::vector<PlannedRun> plan_runs(const StudySettings& s, const std::vector<StudyDataSet>& sets) {
  std::vector<PlannedRun> runs;
  for (const std::string& device : s.devices)
    for (int64_t seed = 0; seed < s.seeds; ++seed)
      for (size_t i = 0; i < sets.size(); ++i)
        for (const std::string& model : sets[i].pipeline ? s.decoded_models : s.memory_models)
          for (const StudyConfig& c : table_configs(s, sets[i], model, device))
            runs.push_back({device, i, model, c, seed});
  return runs;
}

std::string measured_key(const std::string& device, const std::string& data, const std::string& model,
                         const std::string& config) {
  const std::string kind = device.substr(0, device.find(':'));
  return kind + "|" + data + "|" + model + "|" + config;
}

std::string target_key(const std::string& data, const std::string& model, const std::string& config,
                       int64_t target_percent) {
  return data + "|" + model + "|" + config + "|" + std::to_string(target_percent);
}

double estimate_run_seconds(const PlannedRun& r, const StudyDataSet& set, const StudySettings& s,
                            const MeasuredEpochs& measured, bool* from_measurement, const EpochsToTarget& to_target) {
  const auto it = measured.find(measured_key(r.device, set.key, r.model, r.config.name));
  if (from_measurement) *from_measurement = it != measured.end();
  const bool cuda = r.device != "cpu";
  TrainOptions o;
  o.model = r.model, o.device = r.device;
  r.config.apply(o);
  const double step_ms = assumed_step_ms(cuda, o.model);
  const double samples = double(set.samples > 0 ? set.samples : 60000);
  // f16 on a CPU runs in f32 between conversions: about twice the step (mdl-study on a Zen 5).
  const double amp_factor = !cuda && o.amp == "f16" ? 2 : 1;
  double epoch = it != measured.end() ? it->second : samples / 128 * step_ms * amp_factor / 1000;
  if (it == measured.end() && set.pipeline && o.workers == 0 && o.cache == "none")
    epoch += samples * kDecodeMicroseconds * 1e-6;
  // Validation: a forward pass over the held-out images, about a third of a training step's cost,
  // and on a decoded set the decoding of every held-out image.
  const double validation = double(kValidationSamples) / 128 * step_ms / 3000 +
                            (set.pipeline ? double(kValidationSamples) * kDecodeMicroseconds * 1e-6 : 0);
  int64_t epochs = s.epochs;
  if (s.stop_at_target) {
    const int64_t target = (set.pipeline ? s.decoded_target : s.memory_target).for_model(r.model);
    const auto t = to_target.find(target_key(set.key, r.model, r.config.name, target));
    if (t != to_target.end()) epochs = std::clamp<int64_t>(t->second, 1, s.epochs);
  }
  return kStartSeconds + double(epochs) * (epoch + validation);
}

}  // namespace mdl::train
