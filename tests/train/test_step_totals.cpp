// TrainStep's deferred totals (the loss and correct-count sums kept on the device until
// flush_totals, so a GPU step never waits for the host): the same sums as the per-step path, for
// plain and accumulated micro-batches, and nothing lost or counted twice across flushes; on a GPU
// (skipped without one) the deferred sums there equal the CPU's per-step ones, and an AMP step
// replayed as a CUDA Graph trains as the eager steps do; --cuda-graph's refusals.
#include <doctest/doctest.h>

#include "mdl.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "optim/schedulers.h"
#include "optim/sgd.h"
#include "train/data_parallel.h"
#include "train/loss_fn.h"
#include "tools/mdl_train/options.h"
#include "train/train_step.h"
#include "tests/support/test_util.h"

using namespace mdl;

namespace {

// Runs `steps` SGD steps of a small classifier on fixed batches and returns the totals, flushing
// after the steps listed in flush_after (and at the end).
train::EpochTotals run(bool defer, int64_t grad_accum, const std::vector<int64_t>& flush_after, int64_t steps = 6,
                       Device device = Device::cpu()) {
  manual_seed(3);
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::Linear>(5, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
  model->to(device);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.enabled = false});
  train::DataParallel dp(false, device);
  train::TrainStep step(*model, dp, opt, scaler, nullptr, train::cross_entropy_loss,
                        {.grad_accum = grad_accum, .defer_totals = defer});
  train::EpochTotals totals;
  Generator g(11);
  for (int64_t s = 1; s <= steps; ++s) {
    const Tensor x = randn({13, 5}, {}, &g), y = randint(0, 3, {13}, kI64, &g);
    step(x.to(device), y.to(device), totals);
    for (int64_t f : flush_after)
      if (f == s) step.flush_totals(totals);
  }
  step.flush_totals(totals);
  step.flush_totals(totals);  // a second flush adds nothing
  return totals;
}

}  // namespace

TEST_CASE("TrainStep: deferred totals equal the per-step ones after a flush, with and without accumulation") {
  for (int64_t accum : {1, 3}) {
    CAPTURE(accum);
    const train::EpochTotals now = run(false, accum, {});
    for (const std::vector<int64_t>& flushes : {std::vector<int64_t>{}, {1}, {2, 3, 5}}) {
      const train::EpochTotals later = run(true, accum, flushes);
      CHECK(later.seen == now.seen);
      CHECK(later.seen == 6 * 13);
      CHECK(later.classified == now.classified);
      CHECK(later.correct == now.correct);
      CHECK(later.loss_sum == doctest::Approx(now.loss_sum).epsilon(1e-5));
      CHECK(later.loss_sum > 0);
    }
  }
}

TEST_CASE("TrainStep: before a flush the deferred sums are not in the totals; the sample counts are") {
  manual_seed(3);
  auto model = std::make_shared<nn::Linear>(4, 2);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.enabled = false});
  train::DataParallel dp(false, Device::cpu());
  train::TrainStep step(*model, dp, opt, scaler, nullptr, train::cross_entropy_loss, {.defer_totals = true});
  train::EpochTotals totals;
  step(randn({8, 4}), zeros({8}, kI64), totals);
  CHECK(totals.seen == 8);
  CHECK(totals.loss_sum == 0);
  CHECK(totals.correct == 0);
  step.flush_totals(totals);
  CHECK(totals.loss_sum > 0);
  CHECK(totals.correct >= 0);
  CHECK(totals.correct <= 8);
}

TEST_CASE("cuda: TrainStep's deferred totals equal the CPU's per-step ones" * MDL_CUDA_ONLY) {
  const train::EpochTotals cpu = run(false, 2, {});
  const train::EpochTotals gpu = run(true, 2, {3}, 6, Device::cuda());
  CHECK(gpu.seen == cpu.seen);
  CHECK(gpu.correct == cpu.correct);
  CHECK(gpu.loss_sum == doctest::Approx(cpu.loss_sum).epsilon(1e-4));
}

TEST_CASE("TrainStep: cuda_graph needs deferred totals; mdl-train --cuda-graph refuses what a replay cannot do") {
  auto model = std::make_shared<nn::Linear>(4, 2);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  amp::GradScaler scaler({.enabled = false});
  train::DataParallel dp(false, Device::cpu());
  CHECK_THROWS_WITH_AS(
      train::TrainStep(*model, dp, opt, scaler, nullptr, train::cross_entropy_loss, {.cuda_graph = true}),
      doctest::Contains("cuda_graph needs defer_totals"), Error);
  CHECK(train::parse_train_options({"--device", "cuda", "--cuda-graph"}).cuda_graph);
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--cuda-graph"},
                                              {"--device", "cuda", "--cuda-graph", "--dist"},
                                              {"--device", "cuda", "--cuda-graph", "--profile", "3"}})
    CHECK_THROWS_WITH_AS(train::parse_train_options(bad), doctest::Contains("--cuda-graph does not work with"),
                         std::exception);
}

TEST_CASE("cuda: TrainStep replays an AMP step as a CUDA Graph and trains as the eager steps do" * MDL_CUDA_ONLY) {
  // The same model, batches, clipping and cosine schedule, eager and graphed; the last batch of
  // each epoch is smaller, so it runs eagerly between replays.
  struct Result {
    train::EpochTotals totals;
    std::vector<Tensor> params;
    double lr;
    int64_t replayed, captures;
  };
  auto train_with = [](bool graph) {
    manual_seed(3);
    auto model = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
        std::make_shared<nn::Linear>(5, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
    model->to(Device::cuda());
    optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::CosineAnnealingLR schedule(opt, 30);
    amp::GradScaler scaler({.growth_interval = 4});
    train::DataParallel dp(false, Device::cuda());
    train::TrainStep step(*model, dp, opt, scaler, &schedule, train::cross_entropy_loss,
                          {.clip = 0.5, .amp = {kF16}, .defer_totals = true, .cuda_graph = graph});
    Result r;
    Generator g(11);
    for (int epoch = 0; epoch < 3; ++epoch)
      for (int64_t s = 0; s < 8; ++s) {
        const int64_t n = s == 7 ? 5 : 13;
        const Tensor x = randn({n, 5}, {}, &g), y = randint(0, 3, {n}, kI64, &g);
        step(x.to(Device::cuda()), y.to(Device::cuda()), r.totals);
      }
    step.flush_totals(r.totals);
    for (const Tensor& p : model->parameters()) r.params.push_back(p.cpu());
    r.lr = opt.lr();
    r.replayed = step.replayed_steps(), r.captures = step.captures();
    return r;
  };
  const Result eager = train_with(false), graphed = train_with(true);
  CHECK(graphed.captures == 1);
  CHECK(graphed.replayed == 3 * 7 - 2);  // every full batch after the two warm-up steps
  CHECK(eager.replayed == 0);
  CHECK(graphed.totals.seen == eager.totals.seen);
  CHECK(graphed.totals.correct == eager.totals.correct);
  CHECK(graphed.totals.loss_sum == doctest::Approx(eager.totals.loss_sum).epsilon(1e-5));
  CHECK(graphed.lr == eager.lr);
  for (size_t i = 0; i < eager.params.size(); ++i) CHECK(test::max_rel_diff(graphed.params[i], eager.params[i]) < 1e-5);
}
