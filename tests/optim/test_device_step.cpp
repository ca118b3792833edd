// The optimizer step and GradScaler decided on the device: step_if_finite skips every update and
// step count when the flag is set, bit for bit as if the step had never been called; the scale
// update kernel against the rule it implements, its underflow refused; the step counters; and on
// a GPU the same kernels against the CPU, the scaler's underflow raised at the next sync, and an
// AMP training step captured once as a CUDA Graph whose replays equal eager steps, a replay that
// overflows skipping its update and an lr changed between replays taking effect. GPU cases are skipped (reported skipped) without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "amp/grad_scaler.h"
#include "cuda/api.h"
#include "kernels/amp.h"
#include "kernels/optim.h"
#include "mdl.h"
#include "nn/functional.h"
#include "ops/autocast.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/support/test_util.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

const Device kGpu = Device::cuda();

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

std::vector<MakeOptimizer> optimizers() {
  return {
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(
            std::move(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01});
      },
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(std::move(p),
                                            optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
      },
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 0.01, .amsgrad = true});
      },
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
      },
  };
}

// The gradient of step t, on device d.
Tensor grad_at(int t, const Shape& shape, Device d) {
  manual_seed(uint64_t(100 + t));
  return (randn(shape) * (t == 0 ? 3.0 : 1.0 / t)).to(d);
}

// Runs `steps` steps of opt over one parameter; skip_at's step goes through step_if_finite with
// the flag set, the others with it clear (or through step() when plain). Returns the parameter.
std::vector<float> run(const MakeOptimizer& make, Device d, int steps, int skip_at, bool plain,
                       int64_t* count = nullptr) {
  manual_seed(1);
  Tensor p = randn({37, 5}).to(d).requires_grad_();
  auto opt = make({p});
  for (int t = 0; t < steps; ++t) {
    p.set_grad(grad_at(t, p.shape(), d));
    if (plain) opt->step();
    else opt->step_if_finite(scalar_tensor(t == skip_at ? 1.0 : 0.0, TensorOptions(kF32, d)));
  }
  if (count) *count = opt->step_count();
  return p.to_vector<float>();
}

// The same runs on device d: a step skipped on the device leaves no trace, bit for bit.
void check_skips_leave_no_trace(Device d) {
  for (size_t k = 0; k < optimizers().size(); ++k) {
    CAPTURE(k);
    const MakeOptimizer make = optimizers()[k];
    // Steps 0..4 with step 0 skipped equal steps 1..4 alone: the first real step is step 1, where
    // SGD's momentum buffer starts from the gradient and Adam's bias correction from 1.
    int64_t count = 0;
    const std::vector<float> skipped = run(make, d, 5, 0, false, &count);
    manual_seed(1);
    Tensor p = randn({37, 5}).to(d).requires_grad_();
    auto opt = make({p});
    for (int t = 1; t < 5; ++t) {
      p.set_grad(grad_at(t, p.shape(), d));
      opt->step();
    }
    CHECK(skipped == p.to_vector<float>());
    CHECK(count == 4);
    CHECK(opt->state(p)->steps() == 4);
    // A flag that is never set changes nothing against step().
    CHECK(run(make, d, 4, -1, false) == run(make, d, 4, -1, true));
  }
}

}  // namespace

TEST_CASE("step_if_finite: a step skipped on the device leaves parameters, state and counts as they were") {
  check_skips_leave_no_trace(Device::cpu());
  manual_seed(2);
  Tensor p = randn({3}).requires_grad_();
  optim::SGD opt({p}, {.lr = 0.1});
  CHECK_THROWS_WITH_AS(opt.step_if_finite(Tensor()), doctest::Contains("found_inf must be one f32"), Error);
  CHECK_THROWS_WITH_AS(opt.step_if_finite(zeros({2})), doctest::Contains("found_inf must be one f32"), Error);
}

TEST_CASE("advance_steps and update_scale kernels follow their rules on the CPU") {
  std::vector<Tensor> steps = {zeros({}, kI64), scalar_tensor(41, kI64)};
  kernels::advance_steps(Device::cpu(), steps, Tensor());
  kernels::advance_steps(Device::cpu(), steps, zeros({}));
  kernels::advance_steps(Device::cpu(), steps, ones({}));  // skipped
  CHECK(steps[0].item<int64_t>() == 2);
  CHECK(steps[1].item<int64_t>() == 43);

  // A rule growing every 3 clean steps: the scale, tracker and skip count after each step.
  const kernels::ScaleUpdate rule{.growth_factor = 2.0, .backoff_factor = 0.25, .growth_interval = 3};
  Tensor scale = scalar_tensor(1024.0), tracker = zeros({}, kI64), skipped = zeros({}, kI64);
  const std::vector<int> inf = {0, 0, 1, 0, 0, 0, 0, 1};
  const std::vector<double> want_scale = {1024, 1024, 256, 256, 256, 512, 512, 128};
  const std::vector<int64_t> want_tracker = {1, 2, 0, 1, 2, 0, 1, 0};
  for (size_t i = 0; i < inf.size(); ++i) {
    CAPTURE(i);
    kernels::update_scale(Device::cpu(), scale, tracker, skipped, scalar_tensor(inf[i]), rule);
    CHECK(scale.item<float>() == want_scale[i]);
    CHECK(tracker.item<int64_t>() == want_tracker[i]);
  }
  CHECK(skipped.item<int64_t>() == 2);
  // Growth stops below f32's largest number; a backoff below its smallest normal is refused.
  Tensor big = scalar_tensor(double(std::numeric_limits<float>::max()) / 1.5);
  Tensor t1 = scalar_tensor(0, kI64);
  const kernels::ScaleUpdate every_step{.growth_interval = 1};
  kernels::update_scale(Device::cpu(), big, t1, skipped, zeros({}), every_step);
  CHECK(big.item<float>() == float(double(std::numeric_limits<float>::max()) / 1.5));
  Tensor tiny = scalar_tensor(double(std::numeric_limits<float>::min()));
  CHECK_THROWS_WITH_AS(kernels::update_scale(Device::cpu(), tiny, t1, skipped, ones({}), rule),
                       doctest::Contains("3 steps skipped in all"), Error);
  CHECK(tiny.item<float>() == std::numeric_limits<float>::min());
}

TEST_CASE("GradScaler: its state lives on the loss's device; step() answers lazily") {
  Tensor w = ones({4}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 8.0});
  CHECK(scaler.scale_tensor().dtype() == kF32);
  scaler.scale(sum(w * 2.0)).backward();
  const amp::StepResult r = scaler.step(opt);
  CHECK(r.found_inf().defined());
  CHECK(r.found_inf().item<float>() == 0.0f);
  CHECK(bool(r));
  scaler.update();
  CHECK(w.to_vector<float>() == std::vector<float>(4, 1.0f - 0.1f * 2.0f));
  amp::GradScaler off({.enabled = false});
  CHECK(bool(off.step(opt)));
}

TEST_CASE("cuda: optimizer steps skipped on the device, step counters and the scale update match the CPU" *
          MDL_CUDA_ONLY) {
  check_skips_leave_no_trace(kGpu);
  for (size_t k = 0; k < optimizers().size(); ++k) {
    CAPTURE(k);
    const std::vector<float> cpu = run(optimizers()[k], Device::cpu(), 6, 2, false);
    const std::vector<float> gpu = run(optimizers()[k], kGpu, 6, 2, false);
    CHECK(test::max_rel_diff(from_vector(gpu, {int64_t(gpu.size())}), from_vector(cpu, {int64_t(cpu.size())})) < 1e-5);
  }
  // 100 counters: two launches of the step kernel.
  std::vector<Tensor> steps;
  for (int i = 0; i < 100; ++i) steps.push_back(scalar_tensor(i, TensorOptions(kI64, kGpu)));
  kernels::advance_steps(kGpu, steps, zeros({}, kGpu));
  kernels::advance_steps(kGpu, steps, ones({}, kGpu));
  for (int i = 0; i < 100; ++i) CHECK(steps[size_t(i)].item<int64_t>() == i + 1);

  const kernels::ScaleUpdate rule{.growth_factor = 2.0, .backoff_factor = 0.5, .growth_interval = 2};
  Tensor cs = scalar_tensor(4096.0), ct = zeros({}, kI64), ck = zeros({}, kI64);
  Tensor gs = cs.to(kGpu), gtr = ct.to(kGpu), gk = ck.to(kGpu);
  for (int inf : {0, 1, 0, 0, 1, 1, 0, 0, 0}) {
    kernels::update_scale(Device::cpu(), cs, ct, ck, scalar_tensor(inf), rule);
    kernels::update_scale(kGpu, gs, gtr, gk, scalar_tensor(inf, kGpu), rule);
    CHECK(gs.item<float>() == cs.item<float>());
    CHECK(gtr.item<int64_t>() == ct.item<int64_t>());
    CHECK(gk.item<int64_t>() == ck.item<int64_t>());
  }
  // Underflow on the GPU: the scale stays, and the next synchronisation raises.
  Tensor tiny = scalar_tensor(double(std::numeric_limits<float>::min()), kGpu);
  kernels::update_scale(kGpu, tiny, gtr, gk, ones({}, kGpu), rule);
  CHECK_THROWS_WITH_AS(cuda::synchronize(), doctest::Contains("GradScaler.update: the scale would fall"), Error);
  CHECK(tiny.item<float>() == std::numeric_limits<float>::min());
}

TEST_CASE("cuda: an AMP training step captured as a CUDA Graph replays like eager steps" * MDL_CUDA_ONLY) {
  // Two identical models; one steps eagerly, the other replays a graph of one step. Batches are
  // copied into the graph's input buffers before each replay, as a training loop does.
  for (bool adam : {false, true}) {
    CAPTURE(adam);
    auto make_model = [] {
      manual_seed(3);
      auto m = std::make_shared<nn::Sequential>();
      m->push_back(std::make_shared<nn::Linear>(32, 64));
      m->push_back(std::make_shared<nn::ReLU>());
      m->push_back(std::make_shared<nn::Linear>(64, 10));
      m->to(kGpu);
      return m;
    };
    auto eager = make_model(), graphed = make_model();
    auto make_opt = [&](const std::shared_ptr<nn::Sequential>& m) -> std::unique_ptr<optim::Optimizer> {
      if (adam) return std::make_unique<optim::AdamW>(m->parameters(), optim::AdamWOptions{.lr = 1e-3});
      return std::make_unique<optim::SGD>(m->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    };
    auto opt_e = make_opt(eager), opt_g = make_opt(graphed);
    amp::GradScaler scaler_e({.growth_interval = 3}), scaler_g({.growth_interval = 3});
    Tensor x = zeros({16, 32}, kGpu), y = zeros({16}, TensorOptions(kI64, kGpu));
    auto step = [&](nn::Module& m, optim::Optimizer& opt, amp::GradScaler& scaler) {
      opt.zero_grad(false);
      Tensor loss;
      {
        amp::AutocastGuard autocast(kF16);
        loss = F::cross_entropy(m(x), y);
      }
      scaler.scale(loss).backward();
      scaler.step(opt);
      scaler.update();
    };
    auto batch = [&](int t) {
      manual_seed(uint64_t(50 + t));
      // Batch 5 holds values past f16's range: its gradients overflow and its step is skipped.
      x.copy_(randn({16, 32}) * (t == 5 ? 1e6 : 1.0));
      y.copy_(randint(0, 10, {16}));
    };
    for (int t = 0; t < 2; ++t) {  // warm-up on both: state created, allocator primed
      batch(t);
      step(*eager, *opt_e, scaler_e);
      step(*graphed, *opt_g, scaler_g);
    }
    cuda::synchronize();
    cuda::Graph g;
    batch(2);
    step(*eager, *opt_e, scaler_e);
    g.capture_begin();
    step(*graphed, *opt_g, scaler_g);
    g.capture_end();
    g.replay();  // capture recorded step 2; this runs it
    for (int t = 3; t < 9; ++t) {
      batch(t);
      if (t == 6) {  // an lr changed between replays reaches the graph through sync_device_lr()
        opt_e->set_lr(opt_e->lr() * 0.5);
        opt_g->set_lr(opt_g->lr() * 0.5);
        opt_g->sync_device_lr();
      }
      step(*eager, *opt_e, scaler_e);
      g.replay();
    }
    cuda::synchronize();
    CHECK(scaler_g.get_scale() == scaler_e.get_scale());
    CHECK(scaler_g.skipped_steps() == scaler_e.skipped_steps());
    CHECK(scaler_g.skipped_steps() >= 1);
    CHECK(opt_g->step_count() == opt_e->step_count());
    const auto pe = eager->parameters(), pg = graphed->parameters();
    for (size_t i = 0; i < pe.size(); ++i) CHECK(test::max_rel_diff(pg[i].cpu(), pe[i].cpu()) < 1e-6);
  }
}

TEST_CASE("cuda: dropout refuses to be captured, and works again after the abandoned capture" * MDL_CUDA_ONLY) {
  const Tensor x = ones({64}, kGpu);
  {
    cuda::Graph g;
    g.capture_begin();
    CHECK_THROWS_WITH_AS(F::dropout(x, 0.5, true), doctest::Contains("cannot be captured in a CUDA Graph"), Error);
  }  // the graph ends the abandoned capture
  CHECK_FALSE(cuda::is_capturing());
  CHECK(F::dropout(x, 0.5, true).numel() == 64);
}
