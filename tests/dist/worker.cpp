// mdl_dist_worker SCENARIO: one data-parallel scenario, run by tests/dist/test_dist.cpp under
// `mpirun -np 2`. Each rank prints "rank R key value" lines; rank 0 prints "PASS SCENARIO" when
// its own checks hold. An mdl::Error on any rank prints "rank R error: ..." and ends the whole job
// (dist::abort_all), so a failure never leaves the other rank waiting.
//   equal [bucket_mb] [channels_last]  DDP training == one process on the concatenated batch;
//                      replicas bit-equal (channels_last: conv weights in NHWC memory)
//   accum              no_sync micro-batches: no all_reduce, same result as the whole batch
//   scaler_skip        an inf on one rank skips the step on both (and without sync_found_inf not)
//   errors             bad input to the collectives and DDP throws, naming what was wrong; models that
//                      differ across ranks are refused on every rank; after a caught missing-gradient
//                      error (several buckets in flight, ranks out of step) training goes on correctly
//   rank_death         rank 1 exits mid-training; rank 0 must fail, not hang
//   rank_stall         rank 1 stops calling collectives; rank 0's all_reduce times out
//   size_mismatch      rank 1 receives a broadcast into a smaller tensor: an mdl::Error, not MPI's abort
//   dp_timeout         train::DataParallel with a 1 s timeout: rank 1's barrier gives up while rank 0
//                      "validates" for 3 s
//   train CHECKPOINT   mdl-train --dist (run_training) on a Fashion-MNIST subset; rank 0 saves
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "amp/grad_scaler.h"
#include "dist/ddp.h"
#include "dist/mpi_group.h"
#include "nn/container.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "optim/sgd.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "tensor/parallel.h"
#include "tools/mdl_train/run_training.h"
#include "train/data_parallel.h"

using namespace mdl;

namespace {

constexpr int64_t kPerRank = 4;  // samples per rank and step
constexpr int kSteps = 5;

// Conv -> ReLU -> Conv -> ReLU -> Linear -> ReLU -> Linear on (B, 1, 8, 8): eight parameter
// tensors, ~4.5k values. The second conv has several input channels, so its weight in channels-last
// memory is not contiguous.
nn::ModulePtr make_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = {1, 1}}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv2d>(4, 4, 3, nn::Conv2dOptions{.padding = {1, 1}}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(256, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3)});
}

// The global batch of `step`: the same on every rank; rank r trains on rows [r * kPerRank, ...).
std::pair<Tensor, Tensor> global_batch(int step, int world) {
  Generator g(1000 + uint64_t(step));
  return {randn({kPerRank * world, 1, 8, 8}, {}, &g), randint(0, 3, {kPerRank * world}, kI64, &g)};
}

Tensor loss_of(nn::Module& m, const Tensor& x, const Tensor& y) { return nn::functional::cross_entropy(m(x), y); }

uint64_t hash_params(nn::Module& m) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes
  for (const Tensor& p : m.parameters()) {
    const Tensor c = p.contiguous();
    const auto* b = static_cast<const unsigned char*>(c.raw_data());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  return h;
}

double max_abs_diff(nn::Module& a, nn::Module& b) {
  double d = 0;
  auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].to_vector<float>(), vb = pb[i].to_vector<float>();
    for (size_t k = 0; k < va.size(); ++k) d = std::max(d, double(std::fabs(va[k] - vb[k])));
  }
  return d;
}

// Elements where this rank's parameters differ bit-wise from rank 0's, summed over all ranks.
int64_t mismatches_vs_rank0(nn::Module& m, dist::ProcessGroup& pg) {
  int64_t mismatch = 0;
  for (const Tensor& p : m.parameters()) {
    Tensor theirs = p.contiguous().clone();
    pg.broadcast(theirs, 0);
    mismatch += std::memcmp(theirs.raw_data(), p.contiguous().raw_data(), p.nbytes()) != 0;
  }
  Tensor total = scalar_tensor(double(mismatch), kI64);
  pg.all_reduce(total);
  return total.item<int64_t>();
}

void print(dist::ProcessGroup& pg, const char* key, const std::string& value) {
  std::printf("rank %d %s %s\n", pg.rank(), key, value.c_str());
  std::fflush(stdout);
}

bool check(dist::ProcessGroup& pg, bool ok, const std::string& what) {
  if (!ok) print(pg, "FAILED", what);
  return ok;
}

// DDP on kPerRank samples per rank vs one model on the whole batch, kSteps of SGD with momentum.
bool scenario_equal(dist::ProcessGroup& pg, double bucket_mb, bool accumulate, bool channels_last = false) {
  auto model = make_model(7 + uint64_t(pg.rank()));  // ranks start apart; DDP's broadcast fixes that
  auto reference = make_model(7);                    // rank 0's start
  if (channels_last) model->to(MemoryFormat::ChannelsLast);
  dist::DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = bucket_mb});
  const Tensor conv_weight = model->parameters()[2];  // [4,4,3,3]
  bool ok = check(pg, conv_weight.is_contiguous() != channels_last, "DDP changed the conv weight's memory layout");
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = global_batch(step, pg.world_size());
    const Tensor xr = x.narrow(0, pg.rank() * kPerRank, kPerRank), yr = y.narrow(0, pg.rank() * kPerRank, kPerRank);
    opt.zero_grad();
    if (accumulate) {  // two micro-batches of half the rank's share; only the second synchronises
      const int64_t h = kPerRank / 2;
      {
        auto no_sync = ddp.no_sync();
        (nn::functional::cross_entropy(ddp(xr.narrow(0, 0, h)), yr.narrow(0, 0, h)) * 0.5).backward();
      }
      (nn::functional::cross_entropy(ddp(xr.narrow(0, h, h)), yr.narrow(0, h, h)) * 0.5).backward();
    } else {
      nn::functional::cross_entropy(ddp(xr), yr).backward();
    }
    ddp.wait();
    opt.step();
    ref_opt.zero_grad();
    loss_of(*reference, x, y).backward();
    ref_opt.step();
  }
  const int64_t mismatch = mismatches_vs_rank0(*model, pg);
  const double diff = max_abs_diff(*model, *reference);
  print(pg, "buckets", std::to_string(ddp.num_buckets()));
  print(pg, "all_reduces", std::to_string(ddp.all_reduces_started()));
  print(pg, "all_reduces_during_backward", std::to_string(ddp.all_reduces_started_during_backward()));
  print(pg, "hash", std::to_string(hash_params(*model)));
  char diff_text[32];
  std::snprintf(diff_text, sizeof diff_text, "%.3g", diff);
  print(pg, "max_diff_vs_single_process", diff_text);
  ok &= check(pg, mismatch == 0, "replicas differ in " + std::to_string(mismatch) + " tensors");
  ok &= check(pg, diff < 1e-5, "DDP differs from single-process training by " + std::to_string(diff));
  ok &= check(pg, ddp.all_reduces_started() == kSteps * ddp.num_buckets(),
              "expected one all_reduce per bucket and step, got " + std::to_string(ddp.all_reduces_started()));
  // Every bucket but the last (the first layers' gradients) starts before backward ends.
  ok &= check(pg, ddp.all_reduces_started_during_backward() == kSteps * (ddp.num_buckets() - 1),
              "expected all but the last bucket to start during backward, got " +
                  std::to_string(ddp.all_reduces_started_during_backward()));
  return ok;
}

// Rank 1 turns one gradient into inf after DDP's average, at step 2: only a shared verdict keeps
// the replicas equal. Returns the skips this rank saw.
int64_t train_with_one_sided_inf(dist::ProcessGroup& pg, bool shared_verdict, nn::Module*& out_model,
                                 nn::ModulePtr& keep) {
  keep = make_model(7);
  dist::DistributedDataParallel ddp(keep, pg);
  optim::SGD opt(keep->parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 1024.0});
  if (shared_verdict) dist::sync_found_inf(scaler, pg);
  for (int step = 0; step < 4; ++step) {
    auto [x, y] = global_batch(step, pg.world_size());
    opt.zero_grad();
    scaler
        .scale(loss_of(ddp.module(), x.narrow(0, pg.rank() * kPerRank, kPerRank),
                       y.narrow(0, pg.rank() * kPerRank, kPerRank)))
        .backward();
    ddp.wait();
    if (step == 2 && pg.rank() == 1) {
      Tensor g = keep->parameters()[0].grad();
      g.data_ptr<float>()[0] = std::numeric_limits<float>::infinity();
    }
    scaler.step(opt);
    scaler.update();
  }
  out_model = keep.get();
  return scaler.skipped_steps();
}

bool scenario_scaler_skip(dist::ProcessGroup& pg) {
  nn::Module* m = nullptr;
  nn::ModulePtr keep;
  const int64_t shared = train_with_one_sided_inf(pg, true, m, keep);
  const int64_t mismatch_shared = mismatches_vs_rank0(*m, pg);
  const int64_t local = train_with_one_sided_inf(pg, false, m, keep);
  const int64_t mismatch_local = mismatches_vs_rank0(*m, pg);
  print(pg, "skipped_with_sync_found_inf", std::to_string(shared));
  print(pg, "skipped_without", std::to_string(local));
  bool ok = check(pg, shared == 1, "with sync_found_inf every rank must skip exactly once");
  ok &= check(pg, mismatch_shared == 0, "with sync_found_inf the replicas must stay equal");
  // The control: without the shared verdict only rank 1 skips, and the replicas drift apart.
  ok &= check(pg, local == (pg.rank() == 1 ? 1 : 0), "without sync_found_inf only rank 1 should skip");
  ok &= check(pg, mismatch_local > 0, "without sync_found_inf the replicas should differ");
  return ok;
}

template <class F>
bool throws_with(dist::ProcessGroup& pg, F f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(needle) != std::string::npos) return true;
    return check(pg, false, "error '" + std::string(e.what()) + "' does not mention '" + needle + "'");
  }
  return check(pg, false, "no error; expected one mentioning '" + needle + "'");
}

// Models that differ across ranks: DDP's constructor throws the same error on every rank.
bool differing_models_refused(dist::ProcessGroup& pg) {
  const bool one = pg.rank() == 1;
  auto linear = [](int64_t in, int64_t out) { return std::make_shared<nn::Linear>(in, out); };
  auto refused = [&](nn::ModulePtr m, const std::string& needle) {
    return throws_with(
        pg, [&] { dist::DistributedDataParallel(m, pg); }, needle);
  };
  // The same bytes in another shape.
  bool ok = refused(one ? linear(6, 4) : linear(4, 6),
                    "state entry 0 is 'weight' [6,4] f32 (requires_grad) on rank 0 but 'weight' [4,6] f32 "
                    "(requires_grad) on rank 1");
  ok &= refused(one ? linear(4, 8) : linear(4, 6), "'weight' [8,4] f32 (requires_grad) on rank 1");
  ok &= refused(one ? linear(4, 2) : linear(4, 6), "'weight' [2,4] f32 (requires_grad) on rank 1");
  nn::ModulePtr wide = linear(4, 6);
  if (one) wide->to(kF64);
  ok &= refused(wide, "'weight' [6,4] f64 (requires_grad) on rank 1");
  auto layers = [&](int n) {
    auto seq = std::make_shared<nn::Sequential>();
    for (int i = 0; i < n; ++i) seq->push_back(linear(4, 4));
    return seq;
  };
  ok &= refused(layers(one ? 2 : 1),
                "state entry 2 is nothing (2 entries in all) on rank 0 but '1.weight' [4,4] f32 (requires_grad) on "
                "rank 1 (the ranks hold 2 to 4 state entries)");
  return ok;
}

// Every rank leaves the same parameter out of one step's graph and catches wait()'s error, rank 1
// arriving late, with the other buckets' all_reduces started; the next steps must average right.
bool training_goes_on_after_missing_gradient(dist::ProcessGroup& pg) {
  auto model = make_model(3);
  auto reference = make_model(3);
  auto unused = std::make_shared<nn::Linear>(2, 2);
  auto both = std::make_shared<nn::Sequential>();
  both->push_back("unused", unused);  // registered first: its gradient goes in the last bucket
  both->push_back("net", model);
  dist::DistributedDataParallel ddp(both, pg, {.bucket_cap_mb = 0.002});
  bool ok = check(pg, ddp.num_buckets() >= 3, "expected several buckets, got " + std::to_string(ddp.num_buckets()));
  auto [x, y] = global_batch(0, pg.world_size());
  const Tensor xr = x.narrow(0, pg.rank() * kPerRank, kPerRank), yr = y.narrow(0, pg.rank() * kPerRank, kPerRank);
  if (pg.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  loss_of(*model, xr, yr).backward();
  ok &= check(pg, ddp.all_reduces_started() == ddp.num_buckets() - 1, "all buckets but the unused one should start");
  ok &= throws_with(
      pg, [&] { ddp.wait(); }, "'unused.weight'");
  for (int step = 1; step <= 2; ++step) {
    std::tie(x, y) = global_batch(step, pg.world_size());
    both->zero_grad();
    reference->zero_grad();
    const Tensor touch_unused = sum((*unused)(zeros({1, 2}))) * 0.0;
    (loss_of(*model, x.narrow(0, pg.rank() * kPerRank, kPerRank), y.narrow(0, pg.rank() * kPerRank, kPerRank)) +
     touch_unused)
        .backward();
    ddp.wait();
    loss_of(*reference, x, y).backward();
    double diff = 0;
    const auto mine = model->parameters(), theirs = reference->parameters();
    for (size_t i = 0; i < mine.size(); ++i)
      diff = std::max(diff, max(abs(mine[i].grad() - theirs[i].grad())).item<double>());
    ok &= check(pg, diff < 1e-5,
                "step " + std::to_string(step) + ": gradients differ from the whole batch's by " +
                    std::to_string(diff));
  }
  return ok;
}

bool scenario_errors(dist::ProcessGroup& pg) {
  bool ok = throws_with(
      pg, [&] { pg.all_reduce(zeros({4}, kF16)); }, "MPI cannot reduce f16");
  ok &= throws_with(
      pg, [&] { pg.broadcast(zeros({4}), 5); }, "root 5 is not a rank");
  ok &= throws_with(
      pg,
      [&] {
        pg.all_reduce(zeros({4, 4}).t());
      },
      "not contiguous");
  ok &= throws_with(
      pg, [&] { pg.all_reduce(zeros({4}, kI64), dist::ReduceOp::Average); }, "average needs a floating");
  ok &= throws_with(
      pg, [&] { dist::DistributedDataParallel(make_model(1), pg, {.bucket_cap_mb = 0}); },
      "bucket_cap_mb must be a positive finite number");
  ok &= throws_with(
      pg, [&] { dist::DistributedDataParallel(make_model(1), pg, {.bucket_cap_mb = INFINITY}); },
      "bucket_cap_mb must be a positive finite number");
  ok &= throws_with(
      pg, [&] { dist::DistributedDataParallel(make_model(1), pg, {.bucket_cap_mb = NAN}); },
      "bucket_cap_mb must be a positive finite number");
  ok &= check(pg, dist::DistributedDataParallel(make_model(1), pg, {.bucket_cap_mb = 1e300}).num_buckets() == 1,
              "a huge bucket_cap_mb should give one bucket");
  ok &= differing_models_refused(pg);
  ok &= training_goes_on_after_missing_gradient(pg);
  // Still usable afterwards.
  Tensor t = full({3}, double(pg.rank() + 1));
  pg.all_reduce(t, dist::ReduceOp::Average);
  ok &= check(pg, t.to_vector<float>()[0] == 1.5f, "average of 1 and 2 should be 1.5");
  return ok;
}

// Rank 1 leaves at step 2 (dies, or stops calling collectives); rank 0 keeps training.
void scenario_lost_rank(dist::ProcessGroup& pg, bool dies) {
  auto model = make_model(7);
  dist::DistributedDataParallel ddp(model, pg);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  for (int step = 0; step < 50; ++step) {
    if (step == 2 && pg.rank() == 1) {
      print(pg, dies ? "exiting" : "stalling", "at step 2");
      if (dies) _exit(7);
      std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    auto [x, y] = global_batch(step, pg.world_size());
    opt.zero_grad();
    loss_of(ddp.module(), x.narrow(0, pg.rank() * kPerRank, kPerRank), y.narrow(0, pg.rank() * kPerRank, kPerRank))
        .backward();
    ddp.wait();
    opt.step();
  }
}

// Rank 0 works alone for 3 s (validation) before the epoch's barrier; rank 1 waits only 1 s.
void scenario_dp_timeout() {
  train::DataParallel dp(true, Device::cpu(), 25, 1.0);
  if (dp.rank() == 0) std::this_thread::sleep_for(std::chrono::seconds(3));
  dp.barrier();
}

// Two epochs of an MLP on 512 samples (256 per rank); both ranks end with rank 0's checkpoint weights.
bool scenario_train(dist::ProcessGroup& pg, const std::string& checkpoint) {
  const train::TrainOptions o = train::parse_train_options(std::vector<std::string>{
      "--dist", "--model", "mlp", "--subset", "512", "--val-subset", "1000", "--epochs", "2", "--batch", "32",
      "--threads", "1", "--no-progress", "--dist-timeout", "60", "--save", checkpoint});
  const train::TrainReport r = train::run_training(o, stdout);
  bool ok = check(pg, r.epochs.size() == 2, "two epochs expected");
  if (pg.rank() == 0) ok &= check(pg, r.epochs.back().val_accuracy > 0.3, "rank 0 validates (accuracy above chance)");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  set_num_threads(1);
  int rank = -1;
  try {
    dist::MpiProcessGroup pg({.timeout_seconds = scenario == "rank_death" || scenario == "rank_stall" ? 3.0 : 60.0});
    rank = pg.rank();
    MDL_CHECK(pg.world_size() >= 2, "mdl_dist_worker: run it under mpirun -np 2 (world size is ", pg.world_size(), ")");
    bool ok = false;
    if (scenario == "equal")
      ok = scenario_equal(pg, argc > 2 ? std::stod(argv[2]) : 25.0, false,
                          argc > 3 && std::string(argv[3]) == "channels_last");
    else if (scenario == "accum") ok = scenario_equal(pg, 25.0, true);
    else if (scenario == "scaler_skip") ok = scenario_scaler_skip(pg);
    else if (scenario == "errors") ok = scenario_errors(pg);
    else if (scenario == "train") ok = scenario_train(pg, argc > 2 ? argv[2] : "mdl_dist_train.safetensors");
    else if (scenario == "rank_death") scenario_lost_rank(pg, true);
    else if (scenario == "rank_stall") scenario_lost_rank(pg, false);
    else if (scenario == "dp_timeout") scenario_dp_timeout();
    else if (scenario == "size_mismatch") pg.broadcast(zeros({pg.rank() == 0 ? 8 : 4}), 0);
    else MDL_FAIL("mdl_dist_worker: unknown scenario '", scenario, "'");
    // Every rank's verdict: rank 0 passes only when all ranks' checks held.
    Tensor failures = scalar_tensor(ok ? 0.0 : 1.0, kI64);
    pg.all_reduce(failures);
    if (pg.rank() == 0 && failures.item<int64_t>() == 0) std::printf("PASS %s\n", scenario.c_str());
    std::fflush(stdout);
    return failures.item<int64_t>() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("rank %d error: %s\n", rank, e.what());
    std::fflush(stdout);
    dist::abort_all(3);
  }
}
