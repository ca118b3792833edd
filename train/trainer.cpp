// run_training: the epoch loop with every switch, validation, logging and checkpoints.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "ops/autocast.h"
#include "amp/grad_scaler.h"
#include "tensor/grad_mode.h"
#include "data/loader.h"
#include "io/safetensors.h"
#include "nn/functional.h"
#include "nn/summary.h"
#include "optim/clip.h"
#include "optim/regularization.h"
#include "profiler/scope.h"
#include "profiler/session.h"
#include "tensor/allocator.h"
#include "ops/factory.h"
#include "ops/ops.h"
#include "tensor/parallel.h"
#include "train/csv_log.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/setup.h"
#ifdef MDL_WITH_MPI
#include "data/sampler.h"
#include "dist/ddp.h"
#include "dist/mpi_group.h"
#ifdef MDL_WITH_NCCL
#include "dist/nccl_group.h"
#endif
#endif

namespace mdl::train {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kProfileWarmup = 3;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

data::Cache parse_cache(const std::string& c) {
  return c == "memory" ? data::Cache::Memory : c == "file" ? data::Cache::File : data::Cache::None;
}

// Logits (B, C) or (B, T, V) with targets (B) or (B, T) -> (N, C) and (N).
std::pair<Tensor, Tensor> flatten_for_loss(const Tensor& logits, const Tensor& y) {
  if (logits.dim() == 3) return {logits.reshape({-1, logits.size(2)}), y.reshape({-1})};
  return {logits, y};
}

int64_t count_correct(const Tensor& logits, const Tensor& y) {
  NoGradGuard no_grad;
  return sum(eq(argmax(logits.detach(), 1), y)).to(kI64).item<int64_t>();
}

// The training-state file beside a checkpoint: optimizer and loss-scaler state, and the epoch.
std::string state_path(const std::string& checkpoint) { return checkpoint + ".train.safetensors"; }

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& opt,
                     const amp::GradScaler& scaler, const TrainOptions& o, int64_t epoch) {
  const io::Metadata meta = {{"epoch", std::to_string(epoch)}, {"model", o.model}, {"data", o.data}};
  io::save_safetensors(path, model.state_dict(), meta);
  NamedTensors state;
  for (auto& [n, t] : opt.state_dict()) state.emplace_back("optimizer." + n, t);
  for (auto& [n, t] : scaler.state_dict()) state.emplace_back("scaler." + n, t);
  io::save_safetensors(state_path(path), state, meta);
}

// Loads the model and, when its state file exists, the optimizer and scaler; returns the epochs done.
int64_t resume_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler) {
  model.load_state_dict(io::load_safetensors(path));
  if (!std::filesystem::exists(state_path(path))) return 0;
  auto contents = io::read_safetensors(state_path(path));
  NamedTensors optimizer_state, scaler_state;
  for (auto& [n, t] : contents.tensors) {
    if (n.rfind("optimizer.", 0) == 0) optimizer_state.emplace_back(n.substr(10), t);
    if (n.rfind("scaler.", 0) == 0) scaler_state.emplace_back(n.substr(7), t);
  }
  opt.load_state_dict(optimizer_state);
  if (!scaler_state.empty() && scaler.is_enabled()) scaler.load_state_dict(scaler_state);
  for (auto& [k, v] : contents.metadata)
    if (k == "epoch") return std::stoll(v);
  return 0;
}

struct Validation {
  double loss = NAN, accuracy = NAN, macro_f1 = NAN;
  std::string confusion;
};

Validation validate(nn::Module& model, data::DataLoader& loader, Device device, bool autocast, DType amp_dtype,
                    int64_t classes, const std::vector<std::string>& names) {
  model.eval();
  NoGradGuard no_grad;
  ConfusionMatrix cm(classes);
  double loss_sum = 0;
  int64_t n = 0;
  for (auto& [xb, yb] : loader) {
    Tensor x = xb.to(device), y = yb.to(device);
    Tensor logits;
    {
      amp::AutocastGuard guard(amp_dtype, autocast);
      logits = model(x);
    }
    auto [l, t] = flatten_for_loss(logits.to(kF32), y);
    loss_sum += nn::functional::cross_entropy(l, t).item<double>() * double(t.size(0));
    n += t.size(0);
    cm.add(l, t);
  }
  model.train();
  if (n == 0) return {};
  return {loss_sum / double(n), cm.accuracy(), cm.macro_f1(), cm.str(names)};
}

// --dist: the process groups and the DDP wrapper; a single process has none of them.
struct Distributed {
#ifdef MDL_WITH_MPI
  std::unique_ptr<dist::MpiProcessGroup> mpi;
  std::unique_ptr<dist::ProcessGroup> gpu;  // NCCL, when training on CUDA
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  dist::ProcessGroup& group() { return gpu ? *gpu : *mpi; }
#endif
  int rank = 0, world = 1;
  bool active = false;

  // Sums values over the ranks (epoch statistics); a no-op alone.
  void sum(std::vector<double>& v) {
#ifdef MDL_WITH_MPI
    if (!active) return;
    Tensor t = from_vector(v, {int64_t(v.size())}).to(kF64);
    mpi->all_reduce(t);
    v = t.to_vector<double>();
#else
    (void)v;
#endif
  }
  void barrier() {
#ifdef MDL_WITH_MPI
    if (active) mpi->barrier();
#endif
  }
};

}  // namespace

TrainReport run_training(const TrainOptions& o, std::FILE* out) {
  if (o.threads > 0) set_num_threads(int(o.threads));
  manual_seed(o.seed);
  const Device device = parse_device(o.device);
  Distributed dp;
#ifdef MDL_WITH_MPI
  if (o.dist) {
    dp.mpi = std::make_unique<dist::MpiProcessGroup>();
    dp.rank = dp.mpi->rank(), dp.world = dp.mpi->world_size(), dp.active = true;
#ifdef MDL_WITH_NCCL
    if (device.is_cuda()) dp.gpu = std::make_unique<dist::NcclProcessGroup>(*dp.mpi);
#endif
    MDL_CHECK(!device.is_cuda() || dp.gpu, "mdl-train: --dist on ", device, " needs NCCL (a build with CUDA and MPI)");
    if (dp.rank != 0) out = nullptr;  // rank 0 alone prints
  }
#else
  MDL_CHECK(!o.dist, "mdl-train: --dist needs a build with MPI");
#endif
  TrainReport report;
  const DataBundle d = make_data(o);
  report.data_description = d.description;
  nn::ModulePtr model = make_model(o, d);
  report.parameters = model->num_parameters();
  {
    const Tensor example = d.vocab ? zeros({1, d.context}, kI64) : zeros({1, d.channels, d.image_size, d.image_size});
    report.model_summary = nn::summary(*model, example);
  }
  if (out)
    std::fprintf(out, "data: %s; %lld training samples, %lld validation samples\n%s\n", d.description.c_str(),
                 (long long)d.train->size(), (long long)(d.test ? d.test->size() : 0), report.model_summary.c_str());
  model->to(device);
  auto opt = make_optimizer(o, *model);

  data::LoaderOptions lo;
  lo.batch_size = o.batch, lo.shuffle = true, lo.num_workers = int(o.workers), lo.prefetch = int(o.prefetch);
  lo.cache = parse_cache(o.cache), lo.cache_dir = o.cache_dir, lo.pin_memory = o.pin_memory, lo.seed = o.seed;
  lo.transform = d.transform;
#ifdef MDL_WITH_MPI
  if (dp.active) {  // each rank a disjoint shard of the epoch's permutation
    lo.shuffle = false;
    lo.sampler = std::make_shared<data::DistributedSampler>(d.train->size(), dp.rank, dp.world,
                                                            data::DistributedSamplerOptions{.seed = o.seed});
  }
#endif
  data::DataLoader train_loader(*d.train, lo);
  std::unique_ptr<data::DataLoader> test_loader;
  if (d.test) {
    data::LoaderOptions vo = lo;
    vo.batch_size = std::max<int64_t>(o.batch, 256), vo.shuffle = false, vo.sampler = nullptr;
    test_loader = std::make_unique<data::DataLoader>(*d.test, vo);
  }
  auto schedule = make_schedule(o, *opt, train_loader.size());
  const bool autocast = o.amp != "none";
  const DType amp_dtype = o.amp == "bf16" ? kBF16 : kF16;
  amp::GradScaler scaler({.enabled = o.amp == "f16"});
  const std::vector<Tensor> l2_weights = o.l2 > 0 ? dense_weights(*model) : std::vector<Tensor>{};
  const std::vector<Tensor> params = model->parameters();

  if (!o.dump_order.empty() && dp.rank == 0) {
    std::FILE* f = std::fopen(o.dump_order.c_str(), "wb");
    MDL_CHECK(f, "mdl-train: cannot write --dump-order file '", o.dump_order, "'");
    bool ok = true;
    for (int64_t e = 0; e < o.epochs; ++e) {
      const std::vector<int64_t> order = train_loader.epoch_order(e);
      ok &= std::fwrite(order.data(), sizeof(int64_t), order.size(), f) == order.size();
    }
    ok &= std::fclose(f) == 0;
    MDL_CHECK(ok, "mdl-train: writing --dump-order file '", o.dump_order, "' failed");
  }
  int64_t first_epoch = 0;
  if (!o.resume.empty()) {
    first_epoch = resume_checkpoint(o.resume, *model, *opt, scaler);
    if (schedule) schedule->set_epoch(first_epoch * train_loader.size());
    if (out) std::fprintf(out, "resumed from %s after epoch %lld\n", o.resume.c_str(), (long long)first_epoch);
  }
#ifdef MDL_WITH_MPI
  if (dp.active) {  // after resume: every rank starts from rank 0's weights either way
    dp.ddp = std::make_unique<dist::DistributedDataParallel>(model, dp.group(),
                                                             dist::DdpOptions{.bucket_cap_mb = o.bucket_mb});
    dist::sync_found_inf(scaler, dp.group());
  }
#endif
  // Through DDP when distributed (it broadcasts rank 0's buffers first).
  auto forward = [&](const Tensor& x) {
#ifdef MDL_WITH_MPI
    if (dp.ddp) return dp.ddp->forward(x);
#endif
    return (*model)(x);
  };
  // With DDP only the step's last micro-batch (sync) averages gradients; the others stay local.
  auto backward = [&](const Tensor& loss, bool sync) {
#ifdef MDL_WITH_MPI
    if (dp.ddp) {
      if (sync) {
        loss.backward();
        dp.ddp->wait();
        return;
      }
      auto guard = dp.ddp->no_sync();
      loss.backward();
      return;
    }
#endif
    (void)sync;
    loss.backward();
  };
  std::unique_ptr<CsvLog> log;
  if (!o.log.empty() && dp.rank == 0)
    log = std::make_unique<CsvLog>(o.log, std::vector<std::string>{"epoch", "train_loss", "train_accuracy", "val_loss",
                                                                   "val_accuracy", "val_macro_f1", "seconds",
                                                                   "wait_fraction", "samples_per_second", "lr",
                                                                   "skipped_steps", "peak_bytes"});
  const bool terminal = out && o.progress && out == stderr;
  const auto run_start = Clock::now();
  for (int64_t epoch = first_epoch; epoch < o.epochs; ++epoch) {
    model->train();
    reset_peak_memory(device);
    train_loader.set_epoch(epoch);
    const data::LoaderStats before = train_loader.stats();
    Progress progress(out ? out : stdout, terminal, epoch + 1, o.epochs, train_loader.size());
    std::unique_ptr<profiler::Session> session;
    const auto t0 = Clock::now();
    double loss_sum = 0;
    int64_t seen = 0, correct = 0, step = 0;
    for (auto& [xb, yb] : train_loader) {
      const Tensor x = xb.to(device), y = yb.to(device);
      const int64_t n = x.size(0), k = std::min(o.grad_accum, n);
      opt->zero_grad();
      for (int64_t i = 0; i < k; ++i) {
        // Micro-batch i; each loss weighted by its share of the batch, so the summed gradient
        // is the gradient of the whole batch's mean loss.
        const int64_t a = i * n / k, b = (i + 1) * n / k;
        const Tensor xi = x.narrow(0, a, b - a), yi = y.narrow(0, a, b - a);
        Tensor logits, loss;
        {
          profiler::Phase phase(profiler::kForward);
          amp::AutocastGuard guard(amp_dtype, autocast);
          logits = forward(xi);
          auto [l, t] = flatten_for_loss(logits, yi);
          loss = nn::functional::cross_entropy(l, t);
          if (!l2_weights.empty()) loss = loss + optim::l2_penalty(l2_weights, o.l2);
          correct += count_correct(l, t);
          seen += t.size(0);
          loss_sum += loss.item<double>() * double(t.size(0));
        }
        profiler::Phase phase(profiler::kBackward);
        backward(scaler.scale(loss * (double(b - a) / double(n))), i + 1 == k);
      }
      bool stepped = false;
      {
        profiler::Phase phase(profiler::kOptimizer);
        if (o.clip > 0) {
          scaler.unscale_(*opt);
          optim::clip_grad_norm_(params, o.clip);
        }
        stepped = scaler.step(*opt);
        scaler.update();
        if (schedule && stepped) schedule->step();
      }
      ++step;
      if (o.profile > 0) {
        // Warm-up steps first (allocator, caches, first-touch), then o.profile recorded steps.
        if (step == kProfileWarmup) session = std::make_unique<profiler::Session>(profiler::Options{.record_shapes = true});
        else if (session) session->step();
        if (session && session->steps() == o.profile) break;
      }
      if (out) {
        const data::LoaderStats now = train_loader.stats();
        const double elapsed = since(t0);
        progress.update(step, loss_sum / double(std::max<int64_t>(seen, 1)), double(correct) / double(std::max<int64_t>(seen, 1)),
                        double(now.samples - before.samples) * dp.world / std::max(elapsed, 1e-9),
                        (now.wait_seconds - before.wait_seconds) / std::max(elapsed, 1e-9));
      }
    }
    if (out) progress.finish();
    if (o.profile > 0) {
      MDL_CHECK(session && session->steps() == o.profile, "mdl-train: --profile ", o.profile, " needs more than ",
                o.profile + kProfileWarmup, " steps in the first epoch (", kProfileWarmup, " to warm up); it has ", step);
      session->stop();
      report.profile_table = session->table({.row_limit = 25});
      const std::string trace = o.trace.empty() ? "mdl-trace.json" : o.trace;
      if (dp.rank == 0) session->export_chrome_trace(trace);
      if (out)
        std::fprintf(out, "profiled %lld steps after %d warm-up steps:\n%s\ntrace written to %s (open it in "
                          "chrome://tracing or https://ui.perfetto.dev)\n",
                     (long long)session->steps(), kProfileWarmup, report.profile_table.c_str(), trace.c_str());
      break;
    }
    EpochRecord r;
    r.epoch = epoch + 1;
    r.seconds = since(t0);
    const data::LoaderStats after = train_loader.stats();
    r.wait_fraction = (after.wait_seconds - before.wait_seconds) / std::max(r.seconds, 1e-9);
    r.samples_per_second = double(after.samples - before.samples) / std::max(r.seconds, 1e-9);
    std::vector<double> totals = {loss_sum, double(correct), double(seen), double(after.samples - before.samples)};
    dp.sum(totals);  // the whole job's figures, not one shard's
    r.samples_per_second = totals[3] / std::max(r.seconds, 1e-9);
    r.train_loss = totals[0] / std::max(totals[2], 1.0);
    r.train_accuracy = totals[1] / std::max(totals[2], 1.0);
    r.lr = opt->lr();
    r.skipped_steps = scaler.skipped_steps();
    r.peak_bytes = memory_stats(device).peak_bytes;
    if (test_loader && dp.rank == 0) {
      Validation v = validate(*model, *test_loader, device, autocast, amp_dtype, d.classes, d.class_names);
      r.val_loss = v.loss, r.val_accuracy = v.accuracy, r.val_macro_f1 = v.macro_f1;
      report.confusion = v.confusion;
    }
    report.epochs.push_back(r);
    if (out)
      std::fprintf(out, "epoch %lld/%lld: train loss %.4f acc %.2f%% | val loss %.4f acc %.2f%% macro-F1 %.4f | %s, %.0f samples/s, data wait %.1f%%, lr %.3g%s\n",
                   (long long)r.epoch, (long long)o.epochs, r.train_loss, 100 * r.train_accuracy, r.val_loss,
                   100 * r.val_accuracy, r.val_macro_f1, format_seconds(r.seconds).c_str(), r.samples_per_second,
                   100 * r.wait_fraction, r.lr,
                   r.skipped_steps ? (", " + std::to_string(r.skipped_steps) + " skipped steps").c_str() : "");
    if (log)
      log->row({r.epoch, r.train_loss, r.train_accuracy, r.val_loss, r.val_accuracy, r.val_macro_f1, r.seconds,
                r.wait_fraction, r.samples_per_second, r.lr, r.skipped_steps, r.peak_bytes});
    if (!o.save.empty() && dp.rank == 0) save_checkpoint(o.save, *model, *opt, scaler, o, epoch + 1);
    dp.barrier();  // the others wait while rank 0 validates and saves
  }
  report.total_seconds = since(run_start);
  report.rank = dp.rank;
  return report;
}

}  // namespace mdl::train
