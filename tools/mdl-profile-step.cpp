// mdl-profile-step: one training step of a benchmark model (SimpleCNN b128 28x28, ResNet-18 b128
// 32x32, GPT 6x384 context 256 b32) on random data, timed unprofiled and then profiled op by op:
// the per-op table that bench/torch_gpu_step.py --profile prints for PyTorch on the same step.
// The step is bench_cuda's: forward, cross-entropy, backward, SGD with momentum; --amp runs it
// under autocast f16 with a GradScaler; --ceilings adds the roofline columns (each kernel against
// the ceilings mdl-roofline measured) and sorts the table by headroom. Exit status: 0 done, 1
// failed, 2 bad options.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "amp/grad_scaler.h"
#include "cuda/api.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "ops/autocast.h"
#include "profiler/roofline.h"
#include "profiler/scope.h"
#include "profiler/session.h"
#include "switches/list/toggles.h"
#include "switches/switches.h"
#include "train/roofline_ceilings.h"

using namespace mdl;

namespace {

struct Options {
  std::string model = "gpt", device = cuda::is_available() ? "cuda" : "cpu", ceilings;
  bool amp = false, help = false, channels_last = false, by_shape = false;
  int steps = 10, rows = 25, batch = 0;  // batch 0: the model's own (128 images, 32 sequences)
};

const char* kUsage = R"(usage: mdl-profile-step [--model simplecnn|resnet18|gpt] [--amp] [--device cpu|cuda|cuda:N]
                        [--steps N] [--rows N] [--batch N] [--channels-last] [--ceilings FILE]
                        [--by-shape] [--switch NAME=on|off ...]
  --device: cuda when this build and machine have a GPU, else cpu; --model gpt, --steps 10
  times N training steps (after 3 warm-up steps) of the model on random data, then profiles N more
  and prints the profiler's table (its first --rows rows, 25), the step's phases and memory;
  --batch sets the batch (128 images, 32 sequences for gpt), --channels-last lays out the model
  and its images NHWC (mdl-train --channels-last); --ceilings reads the roofline ceilings that
  mdl-roofline wrote (roofline.json) and adds each kernel's intensity, GB/s, binding limit, % of
  bound and headroom to the table, sorted by headroom; --by-shape gives each kernel a row per
  input shapes (one conv layer, one matmul), so the roofline names the layer that is furthest off;
  --switch sets one of `make bench`'s toggles (e.g. cudnn_benchmark=off) for the whole run
)";

int parse_count(const std::string& flag, const char* text, int hi) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > hi)
    throw Error("mdl-profile-step: " + flag + " takes a whole number from 1 to " + std::to_string(hi) + ", not '" +
                text + "'");
  return int(v);
}

// NAME=on or NAME=off: switches::set, which names an unknown switch in its error.
void set_switch(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string name = text.substr(0, eq), value = eq == std::string::npos ? "" : text.substr(eq + 1);
  if (value != "on" && value != "off")
    throw Error("mdl-profile-step: --switch takes NAME=on or NAME=off, not '" + text + "'");
  switches::set(name, value == "on");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw Error("mdl-profile-step: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") o.help = true;
    else if (a == "--model") o.model = value();
    else if (a == "--device") o.device = value();
    else if (a == "--amp") o.amp = true;
    else if (a == "--steps") o.steps = parse_count(a, value(), 10000);
    else if (a == "--rows") o.rows = parse_count(a, value(), 1000);
    else if (a == "--batch") o.batch = parse_count(a, value(), 4096);
    else if (a == "--channels-last") o.channels_last = true;
    else if (a == "--ceilings") o.ceilings = value();
    else if (a == "--by-shape") o.by_shape = true;
    else if (a == "--switch") set_switch(value());
    else throw Error("mdl-profile-step: unknown option '" + a + "'");
  }
  if (o.model != "simplecnn" && o.model != "resnet18" && o.model != "gpt")
    throw Error("mdl-profile-step: --model is simplecnn, resnet18 or gpt, not '" + o.model + "'");
  const Device dev = parse_device(o.device);
  if (dev.is_cuda() && dev.index >= cuda::device_count())
    throw Error("mdl-profile-step: --device " + o.device + ": no GPU " + dev.str() + " here (" +
                std::to_string(cuda::device_count()) + " found" + (cuda::compiled() ? "" : "; this build has no CUDA") +
                "); --device cpu profiles on the CPU");
  return o;
}

// The model, its random batch (images with a class each, or token ids with a next-token target
// per position) and the samples a step consumes.
struct Bench {
  std::shared_ptr<nn::Module> model;
  Tensor x, y;
  double samples = 0;
};

Bench make_bench(const std::string& name, Device dev, int64_t batch) {
  manual_seed(0);
  Bench b;
  if (name == "gpt") {
    const int64_t B = batch ? batch : 32;
    b.model = std::make_shared<nn::models::GPT>();
    b.x = randint(0, 65, {B, 256}, TensorOptions(kI64, dev));
    b.y = randint(0, 65, {B * 256}, TensorOptions(kI64, dev));
    b.samples = double(B * 256);
    return b;
  }
  const int64_t B = batch ? batch : 128;
  const bool cnn = name == "simplecnn";
  b.model = cnn ? std::shared_ptr<nn::Module>(nn::models::SimpleCNN(1, 10, 28)) : nn::models::resnet18(10, 3);
  b.x = cnn ? randn({B, 1, 28, 28}, dev) : randn({B, 3, 32, 32}, dev);
  b.y = randint(0, 10, {B}, TensorOptions(kI64, dev));
  b.samples = double(B);
  return b;
}

void synchronize(Device dev) {
  if (dev.is_cuda()) cuda::synchronize();
}

int run(const Options& o) {
  const Device dev = parse_device(o.device);
  Bench b = make_bench(o.model, dev, o.batch);
  b.model->to(dev);
  if (o.channels_last && b.x.dim() == 4) {
    b.model->to(MemoryFormat::ChannelsLast);
    b.x = b.x.contiguous(MemoryFormat::ChannelsLast);
  }
  b.model->train();
  std::optional<profiler::Ceilings> ceilings;
  if (!o.ceilings.empty())  // before any step: a bad or foreign file fails fast
    ceilings = train::checked_ceilings(o.ceilings, dev.is_cuda());
  optim::SGD opt(b.model->parameters(), {.lr = 0.01, .momentum = 0.9});
  amp::GradScaler scaler({.enabled = o.amp});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      profiler::Phase phase(profiler::kForward);
      amp::AutocastGuard autocast(dev.is_cuda() ? kF16 : kBF16, o.amp);
      Tensor out = (*b.model)(b.x);
      loss = nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}), b.y);
    }
    {
      profiler::Phase phase(profiler::kBackward);
      scaler.scale(loss).backward();
    }
    profiler::Phase phase(profiler::kOptimizer);
    scaler.step(opt);
    scaler.update();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: algorithm search, allocator cache, optimizer state
  synchronize(dev);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) step();
  synchronize(dev);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / o.steps;
  std::printf("== mdl %s %s on %s: %.3f ms/step unprofiled (%d steps, %.0f %s/s)\n", o.model.c_str(),
              o.amp ? "amp" : "f32", dev.str().c_str(), ms, o.steps, b.samples * 1e3 / ms,
              o.model == "gpt" ? "tokens" : "images");

  profiler::Session session(profiler::Options{.record_shapes = true});
  for (int i = 0; i < o.steps; ++i) {
    step();
    synchronize(dev);
    session.step();
  }
  session.stop();
  profiler::TableOptions table{.group_by_shape = o.by_shape, .row_limit = o.rows};
  if (ceilings) {
    table.sort_by = profiler::SortBy::Headroom;
    table.roofline = {.ceilings = &*ceilings,
                      .gpu_tf32 = toggles::allow_tf32(),
                      .gpu_conv_tf32 = toggles::cudnn_allow_tf32()};
  }
  std::printf("%s", session.table(table).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), kUsage);
    return 2;
  }
  if (o.help) {
    std::printf("%s", kUsage);
    return 0;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mdl-profile-step: %s\n", e.what());
    return 1;
  }
}
