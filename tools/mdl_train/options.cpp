// parse_train_options: a table of options, each with a parser that checks its value.
#include "tools/mdl_train/options.h"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace mdl::train {
namespace {

constexpr int64_t kMaxEpochs = 1'000'000, kMaxBatch = int64_t(1) << 24, kMaxSteps = int64_t(1) << 40;
constexpr int64_t kMaxPrefetch = 1024, kMaxWorkers = 1024, kMaxThreads = 1024, kMaxContext = int64_t(1) << 20;
constexpr int64_t kMaxSamples = int64_t(1) << 40;
constexpr double kMaxReal = 1e6, kMaxBucketMb = 1 << 20;

// A number with nothing around it. `range` ("[1, 1000000]") is what an out-of-range one is told.
template <class T>
T parse_number(const std::string& opt, const std::string& v, const std::string& range) {
  T out{};
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, out);
  if (ec == std::errc::result_out_of_range && p == end)
    throw UsageError("mdl-train: " + opt + " must be in " + range + ", got " + v + " (out of range)");
  if (ec != std::errc() || p != end || v.empty())
    throw UsageError("mdl-train: " + opt + " expects a number, got '" + v + "'");
  return out;
}

// Each integer option has a ceiling far above any real run, so no later product of options
// (batch x steps, threads, bytes) can overflow.
int64_t parse_int(const std::string& opt, const std::string& v, int64_t min, int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  auto n = parse_number<int64_t>(opt, v, range);
  if (n < min || n > max) throw UsageError("mdl-train: " + opt + " must be in " + range + ", got " + v);
  return n;
}

std::string real_str(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// A finite real in [min, max], or in (min, max] when min_open.
double parse_real(const std::string& opt, const std::string& v, double min, double max, bool min_open = false) {
  const std::string range = (min_open ? "(" : "[") + real_str(min) + ", " + real_str(max) + "]";
  auto x = parse_number<double>(opt, v, range);
  if (!std::isfinite(x)) throw UsageError("mdl-train: " + opt + " must be a finite number, got " + v);
  if (x < min || x > max || (min_open && x == min))
    throw UsageError("mdl-train: " + opt + " must be in " + range + ", got " + v);
  return x;
}

// A file name: empty would mean "none" for some options and be ignored, so it is refused.
std::string parse_path(const std::string& opt, const std::string& v) {
  if (v.empty()) throw UsageError("mdl-train: " + opt + " needs a file name");
  return v;
}

// "cpu", "cuda" or "cuda:N" with N a device index (at most 1023: no machine has more).
std::string parse_device(const std::string& opt, const std::string& v) {
  if (v == "cpu" || v == "cuda") return v;
  if (v.rfind("cuda:", 0) == 0) {
    const std::string n = v.substr(5);
    int64_t index = -1;
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (ec == std::errc() && p == n.data() + n.size() && !n.empty() && index >= 0 && index <= 1023) return v;
  }
  throw UsageError("mdl-train: " + opt + " must be cpu, cuda or cuda:N with N in [0, 1023]; got '" + v + "'");
}

// "a,b,c": the classes of --classes, each a name or an index, none empty, none twice.
std::vector<std::string> parse_class_list(const std::string& opt, const std::string& v) {
  if (v.empty())
    throw UsageError("mdl-train: " + opt + " needs at least one class (names or indices, comma-separated)");
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = v.find(',', start);
    std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw UsageError("mdl-train: " + opt + " has an empty class in '" + v + "'");
    if (std::find(out.begin(), out.end(), item) != out.end())
      throw UsageError("mdl-train: " + opt + " names class '" + item + "' twice");
    out.push_back(std::move(item));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

template <class Choices>
std::string parse_choice(const std::string& opt, const std::string& v, const Choices& choices) {
  std::string all;
  for (const auto& c : choices) {
    if (v == c) return v;
    all += (all.empty() ? "" : ", ") + std::string(c);
  }
  throw UsageError("mdl-train: " + opt + " must be one of " + all + "; got '" + v + "'");
}
std::string parse_choice(const std::string& opt, const std::string& v, std::initializer_list<const char*> choices) {
  return parse_choice<std::initializer_list<const char*>>(opt, v, choices);
}

struct Option {
  bool takes_value;
  std::function<void(TrainOptions&, const std::string& opt, const std::string& value)> apply;
};

const std::map<std::string, Option>& table() {
  using O = TrainOptions;
  static const std::map<std::string, Option> t = {
      {"--model",
       {true,
        [](O& o, auto& k, auto& v) {
          o.model = parse_choice(k, v, model_names());
          if (o.model == "mobilenet") o.model = "efficientnet";
        }}},
      {"--data",
       {true,
        [](O& o, auto& k, auto& v) {
          const std::string kind = v.substr(0, v.find(':'));
          parse_choice(k, kind, {"fashion-mnist", "imagefolder", "cifar10", "cifar100", "cifar100-coarse", "text"});
          if (kind != "fashion-mnist" && v.find(':') == std::string::npos)
            throw UsageError("mdl-train: " + k + " " + kind + " needs a path: " + kind + ":PATH");
          o.data = v;
        }}},
      {"--classes", {true, [](O& o, auto& k, auto& v) { o.classes = parse_class_list(k, v); }}},
      {"--epochs", {true, [](O& o, auto& k, auto& v) { o.epochs = parse_int(k, v, 1, kMaxEpochs); }}},
      {"--batch", {true, [](O& o, auto& k, auto& v) { o.batch = parse_int(k, v, 1, kMaxBatch); }}},
      {"--optimizer",
       {true,
        [](O& o, auto& k, auto& v) {
          o.optimizer = parse_choice(k, v, {"sgd", "adam", "adamw"});
        }}},
      {"--lr", {true, [](O& o, auto& k, auto& v) { o.lr = parse_real(k, v, 0, kMaxReal); }}},
      {"--momentum", {true, [](O& o, auto& k, auto& v) { o.momentum = parse_real(k, v, 0, kMaxReal); }}},
      {"--schedule",
       {true,
        [](O& o, auto& k, auto& v) {
          o.schedule = parse_choice(k, v, {"none", "cosine", "restarts", "step", "warmup"});
        }}},
      {"--warmup-steps", {true, [](O& o, auto& k, auto& v) { o.warmup_steps = parse_int(k, v, 0, kMaxSteps); }}},
      {"--weight-decay", {true, [](O& o, auto& k, auto& v) { o.weight_decay = parse_real(k, v, 0, kMaxReal); }}},
      {"--l2", {true, [](O& o, auto& k, auto& v) { o.l2 = parse_real(k, v, 0, kMaxReal); }}},
      {"--clip", {true, [](O& o, auto& k, auto& v) { o.clip = parse_real(k, v, 0, kMaxReal); }}},
      {"--grad-accum", {true, [](O& o, auto& k, auto& v) { o.grad_accum = parse_int(k, v, 1, kMaxBatch); }}},
      {"--amp",
       {true,
        [](O& o, auto& k, auto& v) {
          o.amp = parse_choice(k, v, {"none", "f16", "bf16"});
        }}},
      {"--cache",
       {true,
        [](O& o, auto& k, auto& v) {
          o.cache = parse_choice(k, v, {"none", "memory", "file"});
        }}},
      {"--cache-dir", {true, [](O& o, auto& k, auto& v) { o.cache_dir = parse_path(k, v); }}},
      {"--prefetch", {true, [](O& o, auto& k, auto& v) { o.prefetch = parse_int(k, v, 0, kMaxPrefetch); }}},
      {"--workers", {true, [](O& o, auto& k, auto& v) { o.workers = parse_int(k, v, 0, kMaxWorkers); }}},
      {"--pin-memory", {false, [](O& o, auto&, auto&) { o.pin_memory = true; }}},
      {"--no-pin-memory", {false, [](O& o, auto&, auto&) { o.pin_memory = false; }}},
      {"--augment", {false, [](O& o, auto&, auto&) { o.augment = true; }}},
      {"--device",
       {true,
        [](O& o, auto& k, auto& v) {
          o.device = parse_device(k, v);
        }}},
      {"--seed", {true, [](O& o, auto& k, auto& v) { o.seed = parse_number<uint64_t>(k, v, "[0, 2^64 - 1]"); }}},
      {"--subset", {true, [](O& o, auto& k, auto& v) { o.subset = parse_int(k, v, 0, kMaxSamples); }}},
      {"--val-subset", {true, [](O& o, auto& k, auto& v) { o.val_subset = parse_int(k, v, 0, kMaxSamples); }}},
      {"--threads", {true, [](O& o, auto& k, auto& v) { o.threads = parse_int(k, v, 0, kMaxThreads); }}},
      {"--context", {true, [](O& o, auto& k, auto& v) { o.context = parse_int(k, v, 2, kMaxContext); }}},
      {"--save", {true, [](O& o, auto& k, auto& v) { o.save = parse_path(k, v); }}},
      {"--resume", {true, [](O& o, auto& k, auto& v) { o.resume = parse_path(k, v); }}},
      {"--log", {true, [](O& o, auto& k, auto& v) { o.log = parse_path(k, v); }}},
      {"--evaluate", {true, [](O& o, auto& k, auto& v) { o.evaluate = parse_path(k, v); }}},
      {"--profile", {true, [](O& o, auto& k, auto& v) { o.profile = parse_int(k, v, 1, kMaxSteps); }}},
      {"--trace", {true, [](O& o, auto& k, auto& v) { o.trace = parse_path(k, v); }}},
      {"--roofline", {true, [](O& o, auto& k, auto& v) { o.roofline = parse_path(k, v); }}},
      {"--ceilings", {true, [](O& o, auto& k, auto& v) { o.ceilings = parse_path(k, v); }}},
      {"--profile-sort",
       {true,
        [](O& o, auto& k, auto& v) {
          o.profile_sort = parse_choice(k, v, {"total", "self", "calls", "headroom"});
        }}},
      {"--dump-order", {true, [](O& o, auto& k, auto& v) { o.dump_order = parse_path(k, v); }}},
      {"--dist",
       {false,
        [](O& o, [[maybe_unused]] auto& k, auto&) {
#ifndef MDL_WITH_MPI
          throw UsageError("mdl-train: " + k + " needs a build with MPI (make MPI=1; make deps installs Open MPI)");
#endif
          o.dist = true;
        }}},
      {"--bucket-mb",
       {true,
        [](O& o, auto& k, auto& v) {
          o.bucket_mb = parse_real(k, v, 0, kMaxBucketMb, true);
        }}},
      {"--dist-timeout",
       {true,
        [](O& o, auto& k, auto& v) {
          o.dist_timeout = parse_real(k, v, 0, kMaxReal);
          if (!(o.dist_timeout > 0)) throw UsageError("mdl-train: " + k + " must be positive, got " + v);
        }}},
      {"--early-stop", {true, [](O& o, auto& k, auto& v) { o.early_stop = parse_int(k, v, 1, kMaxEpochs); }}},
      {"--save-best", {true, [](O& o, auto& k, auto& v) { o.save_best = parse_path(k, v); }}},
      {"--plateau", {true, [](O& o, auto& k, auto& v) { o.plateau = parse_int(k, v, 1, kMaxEpochs); }}},
      {"--target-accuracy",
       {true,
        [](O& o, auto& k, auto& v) {
          o.target_accuracy = parse_real(k, v, 0, 1, true);
        }}},
      {"--cuda-graph", {false, [](O& o, auto&, auto&) { o.cuda_graph = true; }}},
      {"--channels-last", {false, [](O& o, auto&, auto&) { o.channels_last = true; }}},
      {"--copy-stream", {false, [](O& o, auto&, auto&) { o.copy_stream = true; }}},
      {"--no-progress", {false, [](O& o, auto&, auto&) { o.progress = false; }}},
      {"--help", {false, [](O& o, auto&, auto&) { o.help = true; }}},
  };
  return t;
}

// On a GPU the loader settings the command line left out keep the device fed: workers decode
// while the step runs and batches wait in pinned memory, which copies to the device faster
// (bench/log/2026-11-27-nvidia-h100.md: the SimpleCNN step's data wait fell from about a third of each epoch to under
// 1% on an H100). On the CPU the loader's threads would take the cores the step computes on, so
// there everything stays in the training thread unless asked for.
void apply_gpu_loader_defaults(TrainOptions& o, const std::set<std::string>& given) {
  if (!given.count("--workers"))
    o.workers = std::clamp<int64_t>(int64_t(std::thread::hardware_concurrency()) - 1, 1, kGpuLoaderWorkers);
  if (!given.count("--prefetch")) o.prefetch = kGpuLoaderPrefetch;
  if (!given.count("--pin-memory") && !given.count("--no-pin-memory")) o.pin_memory = true;
}

// An option that only acts with another is refused without it, rather than ignored.
void refuse_ignored_options(const TrainOptions& o, const std::set<std::string>& given) {
  const bool text = o.data.rfind("text:", 0) == 0;
  const struct {
    const char* option;
    bool ignored;
    const char* needs;
  } rules[] = {
      {"--warmup-steps", o.schedule != "warmup", "goes with --schedule warmup"},
      {"--bucket-mb", !o.dist, "goes with --dist"},
      {"--dist-timeout", !o.dist, "goes with --dist"},
      {"--momentum", o.optimizer != "sgd", "goes with --optimizer sgd (adam and adamw have no momentum option)"},
      {"--cache-dir", o.cache != "file", "goes with --cache file"},
      {"--val-subset", text, "picks held-out samples; --data text:PATH has no held-out split"},
  };
  for (const auto& r : rules)
    if (given.count(r.option) && r.ignored) throw UsageError(std::string("mdl-train: ") + r.option + " " + r.needs);
}

// Two outputs written to one file would overwrite each other (and an input the run reads back
// later, such as --save's state file, would be lost): each output file is named once.
void refuse_shared_output_files(const TrainOptions& o) {
  std::vector<std::pair<std::string, std::string>> outputs;  // (what writes it, the file)
  auto add = [&](const std::string& what, const std::string& path) {
    if (!path.empty()) outputs.emplace_back(what, path);
  };
  add("--log", o.log);
  add("--save", o.save);
  if (!o.save.empty()) add("--save's training state", o.save + ".train.safetensors");
  add("--save-best", o.save_best);
  add("--dump-order", o.dump_order);
  if (o.profile) add("--trace", o.trace.empty() ? "mdl-trace.json" : o.trace);
  add("--roofline", o.roofline);
  add("--ceilings", o.ceilings);
  auto same_file = [](const std::string& a, const std::string& b) {
    std::error_code ea, eb;
    const std::filesystem::path pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea),
                                pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
    return a == b || (!ea && !eb && pa == pb);
  };
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (same_file(outputs[i].second, outputs[j].second))
        throw UsageError("mdl-train: " + outputs[i].first + " and " + outputs[j].first + " name the same file '" +
                         outputs[j].second + "'; each output needs its own");
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp",      "cnn",          "cnn-separable",  "resnet18",
                                                 "resnet50", "efficientnet", "efficientnetv2", "mobilenet",
                                                 "vit",      "gpt"};
  return names;
}

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions o;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string key = args[i], value;
    const bool inline_value = key.rfind("--", 0) == 0 && key.find('=') != std::string::npos;
    if (inline_value) value = key.substr(key.find('=') + 1), key = key.substr(0, key.find('='));
    if (key == "-h") key = "--help";
    auto it = table().find(key);
    if (it == table().end()) throw UsageError("mdl-train: unknown option '" + key + "'");
    if (it->second.takes_value && !inline_value) {
      if (i + 1 >= args.size()) throw UsageError("mdl-train: " + key + " needs a value");
      value = args[++i];
    } else if (!it->second.takes_value && inline_value) {
      throw UsageError("mdl-train: " + key + " takes no value");
    }
    it->second.apply(o, key, value);
    given.insert(key);
  }
  if (o.device != "cpu") apply_gpu_loader_defaults(o, given);
  if (o.grad_accum > o.batch)
    throw UsageError("mdl-train: --grad-accum " + std::to_string(o.grad_accum) + " is larger than --batch " +
                     std::to_string(o.batch) + " (each micro-batch needs a sample)");
  if (o.copy_stream && o.device == "cpu")
    throw UsageError("mdl-train: --copy-stream copies batches to a GPU; it needs --device cuda");
  if (o.cuda_graph) {
    // A replay reads nothing back to the host: the profiler's phase times would be, and the
    // data-parallel all_reduce waits on the host.
    const char* clash = o.device == "cpu" ? "--device cpu" : o.profile ? "--profile" : o.dist ? "--dist" : nullptr;
    if (clash) throw UsageError(std::string("mdl-train: --cuda-graph does not work with ") + clash);
  }
  for (const char* needs_profile : {"--trace", "--roofline", "--ceilings", "--profile-sort"})
    if (given.count(needs_profile) && !o.profile)
      throw UsageError(std::string("mdl-train: ") + needs_profile + " goes with --profile N");
  refuse_ignored_options(o, given);
  if (!o.evaluate.empty()) {
    const char* clash = !o.resume.empty()       ? "--resume"
                        : !o.save.empty()       ? "--save"
                        : o.profile             ? "--profile"
                        : o.dist                ? "--dist"
                        : !o.log.empty()        ? "--log"
                        : !o.dump_order.empty() ? "--dump-order"
                                                : nullptr;
    if (clash) throw UsageError(std::string("mdl-train: --evaluate trains nothing; it takes no ") + clash);
  }
  // The callbacks read rank 0's validation; the others would decide without it.
  const char* monitor = o.early_stop            ? "--early-stop"
                        : !o.save_best.empty()  ? "--save-best"
                        : o.plateau             ? "--plateau"
                        : o.target_accuracy > 0 ? "--target-accuracy"
                                                : nullptr;
  if (monitor && !o.evaluate.empty())
    throw UsageError(std::string("mdl-train: --evaluate trains nothing; it takes no ") + monitor);
  if (monitor && o.dist) throw UsageError(std::string("mdl-train: ") + monitor + " does not work with --dist yet");
  if (o.plateau && o.schedule != "none")
    throw UsageError("mdl-train: --plateau and --schedule " + o.schedule +
                     " both set the lr; the schedule would undo every reduction");
  refuse_shared_output_files(o);
  if (o.model == "gpt" && o.data.rfind("text:", 0) != 0)
    throw UsageError("mdl-train: --model gpt needs --data text:PATH");
  if (o.data.rfind("text:", 0) == 0 && o.model != "gpt")
    throw UsageError("mdl-train: --data text:PATH needs --model gpt");
  if (o.augment && o.data.rfind("text:", 0) == 0)
    throw UsageError("mdl-train: --augment crops and flips images; --data text:PATH has none");
  if (o.data.rfind("text:", 0) == 0 && !o.classes.empty())
    throw UsageError("mdl-train: --classes picks classes of image data; --data text:PATH has none");
  return o;
}

bool draws_progress_bar(const TrainOptions& o, bool stdout_is_terminal, bool stderr_is_terminal) {
  return o.progress && stdout_is_terminal && stderr_is_terminal;
}

TrainOptions parse_train_options(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_train_options(args);
}

std::string usage() {
  return R"(usage: mdl-train [options]
  --model M          mlp, cnn (default), cnn-separable (its 2nd conv depthwise separable), resnet18,
                     resnet50, efficientnet (B0; alias mobilenet), efficientnetv2 (V2-B0), vit, gpt
  --data D           fashion-mnist[:ROOT] (default), imagefolder:PATH, cifar10:PATH,
                     cifar100:PATH (train.bin, test.bin; 100 fine labels),
                     cifar100-coarse:PATH (the same files; 20 superclass labels), text:PATH
  --classes LIST     keep only these classes, e.g. 0,3,5 or cat,dog (a class name first, else an
                     index), in training and validation, relabelled 0..k-1 in the order given;
                     the model gets k outputs
  --epochs N         5        --batch N        128
  --optimizer O      sgd, adam, adamw (default)    --lr X  0.001    --momentum X  0.9 (sgd only)
  --schedule S       none, cosine, restarts, step, warmup
  --warmup-steps N   with --schedule warmup: the steps of its linear warmup (0: a twentieth of the run)
  --weight-decay X   decoupled for adamw, coupled (L2 in the gradient) for sgd and adam
  --l2 X             an explicit L2 penalty on the weights, added to the loss
  --clip X           clip the global gradient norm to X
  --grad-accum N     micro-batches per optimizer step (the batch is split N ways)
  --amp P            none, f16, bf16 (autocast; f16 adds a dynamic loss scaler)
  --cache C          none, memory, file
  --cache-dir DIR    with --cache file: where the cache goes (default ($XDG_CACHE_HOME or ~/.cache)/mdl)
  --prefetch N       batches prepared ahead    --workers N   loader threads    --pin-memory
                     (on a GPU, by default: 8 ahead, up to 4 workers, pinned memory; on the CPU none)
  --no-pin-memory    pageable host batches (the default on the CPU)
  --augment          training images: random crop (zero padding of 1/8 of the side) and horizontal
                     flip, after the cache, drawn from (seed, epoch, index); validation unchanged
  --device D         cpu, cuda, cuda:N    --threads N   compute threads (0: every core);
                     each loader worker gets N / workers of them (at least 1; 1 when N is 0)
  --cuda-graph       on a GPU: capture the training step (AMP included) once as a CUDA Graph and
                     replay it per batch; not with --profile, --dist or dropout
  --channels-last    conv weights and image batches in NHWC memory (PyTorch's channels_last): on a
                     GPU f16/bf16 convs run cuDNN's NHWC kernels; the CPU's convs convert
  --copy-stream      on a GPU: the loader's workers copy each batch to the GPU on a side stream
                     (LoaderOptions::device) instead of the training thread on mdl's stream
  --seed N           --context N (text, 64)
  --subset N         N training samples: the first N, or for imagefolder N spread evenly over its
                     class folders
  --val-subset N     validate (and --evaluate) on N held-out samples, picked as --subset picks
                     (image data only: text:PATH has no held-out split)
  --save FILE        --resume FILE (safetensors)    --log FILE (CSV, one row per epoch)
  --evaluate FILE    load FILE's weights (as --save wrote them) into --model, run the held-out split
                     once without gradients, print loss, accuracy and images/s; train nothing
  --profile N        profile N steps after 3 warm-up steps, print the table, write a trace, stop
  --trace FILE       with --profile: where it writes the Chrome trace (mdl-trace.json)
  --roofline FILE    with --profile: draw the roofline (PNG): the machine's ceilings, each kernel a
                     point at its FLOP/byte and GFLOP/s, sized by its share of the step
  --ceilings FILE    with --profile: the roofline ceilings (JSON) that add intensity, GB/s, the
                     binding limit, % of bound and headroom to the table; default roofline.json
                     beside mdl-train (make roofline writes it); with --ceilings, --roofline or
                     --profile-sort headroom they are measured and saved there when missing
  --profile-sort S   with --profile: the table's order: total (default), self, calls, headroom
  --dump-order FILE  write every epoch's sample order (i64, epochs x samples) for compare_torch.py;
                     with --dist rank 0's shard only
  --dist             data parallel: run as mpirun -np N build/mdl-train --dist ...; --batch is per rank
                     (N x batch per step), rank 0 alone prints, validates and saves
  --bucket-mb X      with --dist: MiB of gradients per all_reduce bucket (25)
  --dist-timeout S   with --dist: seconds a rank waits for the others (1800); they wait at each
                     epoch's end while rank 0 validates alone
  --early-stop N     stop when the validation loss has not improved for N epochs
  --save-best FILE   the weights (safetensors) of the epoch with the lowest validation loss so far
  --plateau N        multiply the lr by 0.1 when the validation loss has not improved for more than
                     N epochs (ReduceLROnPlateau; not with --schedule)
  --target-accuracy X  stop once the validation accuracy reaches X (in (0, 1]); prints the epoch
                     and the wall time at which it did
                     (these four need a held-out split, and do not work with --dist)
  --no-progress      plain lines instead of a progress bar
Every output file (--log, --save and its FILE.train.safetensors, --save-best, --dump-order,
--trace, --roofline, --ceilings) must be a file of its own; --save, --save-best and --trace are
checked to be creatable before training starts.
Output: the summary, the epoch lines and the results go to stdout, errors to stderr. When stdout
and stderr are both a terminal, a progress bar redraws in place on stderr and the lines and
results go there with it; `mdl-train > run.log` writes plain lines to run.log.
)";
}

}  // namespace mdl::train
