// mdl-train's command line: every switch the study flips, parsed strictly. A bad option throws
// UsageError naming it; the tool prints the message and usage() and exits with status 2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace mdl::train {

struct UsageError : Error {
  using Error::Error;
};

// A GPU run's loader when the command line names none of --workers, --prefetch, --pin-memory:
// up to kGpuLoaderWorkers workers (one core is left to the training thread), kGpuLoaderPrefetch
// batches ahead, pinned memory.
inline constexpr int64_t kGpuLoaderWorkers = 4, kGpuLoaderPrefetch = 8;

struct TrainOptions {
  std::string model = "cnn";  // mlp, cnn, cnn-separable, resnet18, resnet50, efficientnet, efficientnetv2, vit, gpt
  std::string data = "fashion-mnist";  // fashion-mnist[:ROOT], imagefolder:PATH, cifar10:PATH, cifar100:PATH,
                                       // cifar100-coarse:PATH, text:PATH
  std::vector<std::string> classes;    // keep these classes (names or indices), relabelled 0..k-1; empty = all
  int64_t epochs = 5;
  int64_t batch = 128;
  std::string optimizer = "adamw";  // sgd, adam, adamw
  double lr = 1e-3;
  double momentum = 0.9;          // sgd
  std::string schedule = "none";  // none, cosine, restarts, step, warmup
  int64_t warmup_steps = 0;       // with --schedule warmup (linear warmup, then cosine)
  double weight_decay = 0.0;      // decoupled (AdamW) or coupled (SGD/Adam), as PyTorch
  double l2 = 0.0;                // an explicit L2 penalty added to the loss
  double clip = 0.0;              // max global gradient norm; 0 = off
  int64_t grad_accum = 1;         // micro-batches per optimizer step
  std::string amp = "none";       // none, f16, bf16
  std::string cache = "none";     // none, memory, file
  std::string cache_dir{};        // empty: data::default_cache_dir(), private to the user
  // The loader: parse_train_options gives a GPU run the kGpuLoader* values for those not given.
  int64_t prefetch = 0;  // batches prepared ahead
  int64_t workers = 0;   // loader threads; 0 = load in the training thread
  bool pin_memory = false;
  bool augment = false;  // random crop (zero padding of 1/8 of the side) and horizontal flip, training images only
  std::string device = "cpu";  // cpu, cuda, cuda:N
  bool cuda_graph = false;     // capture the training step once as a CUDA Graph and replay it
  bool channels_last = false;  // conv weights and image batches laid out channels-last (NHWC)
  bool copy_stream = false;    // the loader copies batches to the GPU on its side stream
  uint64_t seed = 0;
  int64_t subset = 0;                   // use the first N training samples; 0 = all
  int64_t val_subset = 0;               // validate (and --evaluate) on N held-out samples; 0 = all
  int64_t threads = 0;                  // compute threads; 0 = every core
  int64_t context = 64;                 // text: characters per sample
  std::string save{}, resume{}, log{};  // safetensors checkpoint out/in, CSV log
  std::string evaluate{};               // a --save weights file: evaluate it on the held-out split, train nothing
  int64_t profile = 0;                  // profile this many steps after warm-up, print the table, stop
  std::string trace{};                  // with --profile: the Chrome trace file (default mdl-trace.json)
  std::string roofline{};               // with --profile: the roofline chart (PNG) of the profiled kernels
  std::string ceilings{};               // with --profile: the roofline ceilings file; empty: beside the program
  std::string profile_sort = "total";   // with --profile: the table's order: total, self, calls, headroom
  std::string dump_order{};             // write each epoch's sample order (i64) here, for compare_torch.py
  bool dist = false;                    // data parallel under mpirun: DDP, DistributedSampler; --batch is per rank
  double bucket_mb = 25;                // with --dist: MiB of gradients per all_reduce
  double dist_timeout = 1800;           // with --dist: seconds a collective waits for the other ranks
  int64_t early_stop = 0;               // stop after N epochs without a better val loss; 0 = off
  std::string save_best{};              // the weights of the epoch with the best val loss so far
  int64_t plateau = 0;                  // ReduceLROnPlateau (x0.1) on val loss with patience N; 0 = off
  double target_accuracy = 0;           // stop once val accuracy >= X, reporting when; 0 = off
  bool progress = true;                 // a progress bar on a terminal
  bool help = false;
};

// argv[0] is the program name. Accepts "--opt value" and "--opt=value". Refuses an option that
// would be ignored (--trace without --profile, --momentum without sgd, ...), an empty file name,
// and two outputs naming one file.
TrainOptions parse_train_options(int argc, const char* const* argv);
TrainOptions parse_train_options(const std::vector<std::string>& args);  // without argv[0]
std::string usage();

// --model's choices: the zoo's models and the alias mobilenet (efficientnet).
const std::vector<std::string>& model_names();

// Whether mdl-train draws its progress bar, and so writes on stderr: only when stdout and stderr
// are both a terminal; otherwise everything but errors goes to stdout as plain lines, so that
// `mdl-train > run.log` keeps the run's output.
bool draws_progress_bar(const TrainOptions& o, bool stdout_is_terminal, bool stderr_is_terminal);

}  // namespace mdl::train
