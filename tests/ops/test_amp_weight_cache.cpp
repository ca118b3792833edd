// amp_weight_cache: a parameter's 16-bit autocast copy outlives the region and the fused optimizer
// steps rewrite it. Training gives the same bits with the switch off and on, while the forward
// launches no cast per weight; after every kind of step the copy is the parameter's rounding; a
// parameter changed elsewhere is cast again; a graph that saved a copy learns that the step changed
// it; the copies of dead parameters go, and turning the switch off drops them all.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "ops/autocast.h"
#include "switches/list/toggles.h"
#include "tests/support/profiler_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

using V = std::vector<Tensor>;

struct Run {
  std::vector<float> losses;
  V params;
  int64_t copies = 0;  // copy kernels in the last step
};

// steps AdamW steps of a 2-layer GPT under autocast bf16, micro micro-batches each; with
// amp_f32_grads off the casts are made under grad mode, and the cache's copies carry nodes.
Run train_gpt(bool cache, int steps, int micro = 1, bool f32_grads = true) {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, cache);
  toggles::Scoped grads(toggles::Toggle::amp_f32_grads, f32_grads);
  manual_seed(7);
  const nn::models::GPTOptions o{.context = 16, .n_layer = 2, .n_head = 2, .n_embd = 32};
  nn::models::GPT gpt(o);
  optim::AdamW opt(gpt.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  Generator g(8);
  const Tensor x = randint(0, o.vocab_size, {2, 16}, TensorOptions(kI64), &g);
  const Tensor y = randint(0, o.vocab_size, {2 * 16}, TensorOptions(kI64), &g);
  Run r;
  for (int s = 0; s < steps; ++s) {
    std::unique_ptr<profiler::Session> prof;
    if (s == steps - 1) prof = std::make_unique<profiler::Session>(profiler::Options{.memory = false});
    opt.zero_grad();
    for (int m = 0; m < micro; ++m) {
      Tensor loss;
      {
        amp::AutocastGuard autocast(kBF16);
        const Tensor logits = gpt.forward(x);
        loss = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), y);
      }
      loss.backward();
      r.losses.push_back(loss.item<float>());
    }
    opt.step();
    if (prof) {
      prof->stop();
      r.copies = int64_t(profiler_test::find_all(*prof, "copy", profiler::EventKind::Kernel).size());
    }
  }
  for (const Tensor& p : gpt.parameters()) r.params.push_back(p.detach().clone());
  return r;
}

void same_bits(const Run& a, const Run& b) {
  CHECK(a.losses == b.losses);
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    CAPTURE(i);
    CHECK(a.params[i].to_vector<float>() == b.params[i].to_vector<float>());
  }
}

std::vector<float> as_floats(const Tensor& t) { return t.to(kF32).to_vector<float>(); }

}  // namespace

TEST_CASE("amp_weight_cache: a GPT trains to the same bits off and on, without the forward's weight casts") {
  const Run off = train_gpt(false, 4), on = train_gpt(true, 4);
  same_bits(off, on);
  CAPTURE(off.copies);
  // A layer's 8 linear weights and biases, and the token embedding the head shares: cast once a
  // step with the switch off, never after the first step with it on.
  CHECK(on.copies == off.copies - (8 * 2 + 1));

  // Gradient accumulation: each micro-batch's forward casts every weight again with the switch off.
  const Run off2 = train_gpt(false, 3, 2), on2 = train_gpt(true, 3, 2);
  same_bits(off2, on2);
  CHECK(on2.copies == off2.copies - 2 * (8 * 2 + 1));

  const Run nodes_off = train_gpt(false, 3, 1, false), nodes_on = train_gpt(true, 3, 1, false);
  same_bits(nodes_off, nodes_on);
  CHECK(nodes_on.copies == nodes_off.copies - (8 * 2 + 1));
  amp::clear_weight_cache();
}

TEST_CASE("amp_weight_cache: after every kind of step the copy is the parameter's rounding") {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  struct Config {
    const char* name;
    bool multi_tensor, fused_adamw, scaler;
    DType dtype;
    std::function<std::unique_ptr<optim::Optimizer>(V)> make;
  };
  const auto sgd = [](V p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  };
  const auto adam = [](V p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 0.05}); };
  const auto adamw = [](V p) {
    return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1});
  };
  const Config configs[] = {{"SGD, one tensor at a time, f16", false, true, false, kF16, sgd},
                            {"SGD, multi-tensor, bf16", true, true, false, kBF16, sgd},
                            {"Adam, multi-tensor, GradScaler, f16", true, true, true, kF16, adam},
                            {"AdamW, one tensor at a time, bf16", false, true, false, kBF16, adamw},
                            {"AdamW, unfused (casts again), bf16", true, false, false, kBF16, adamw}};
  for (const Config& c : configs) {
    CAPTURE(c.name);
    toggles::Scoped multi(toggles::Toggle::multi_tensor_step, c.multi_tensor);
    toggles::Scoped fused(toggles::Toggle::fused_adamw, c.fused_adamw);
    manual_seed(5);
    // 70001 elements: past one CPU chunk of the step (65536) and not a multiple of a vector.
    Tensor w = (randn({7, 10001}) * 0.1).requires_grad_(), b = zeros({7}).requires_grad_();
    Tensor scale = ones({7}).requires_grad_();  // never cast: a parameter without a copy in the same launch
    const Tensor x = randn({5, 10001}), target = randint(0, 7, {5});
    std::unique_ptr<optim::Optimizer> opt = c.make({w, scale, b});
    amp::GradScaler scaler({.init_scale = 1024.0});
    for (int step = 0; step < 4; ++step) {
      CAPTURE(step);
      opt->zero_grad();
      Tensor logits;
      {
        amp::AutocastGuard autocast(c.dtype);
        logits = F::linear(x, w, b);
      }
      CHECK(amp::weight_cache_size() == 2);
      Tensor loss = F::cross_entropy(logits.to(kF32) * scale, target);
      if (c.scaler) {
        // Step 2 overflows: the scaler skips it, and the copy stays the (unchanged) parameter's.
        scaler.scale(step == 2 ? loss * 1e38 : loss).backward();
        scaler.step(*opt);
        scaler.update();
      } else {
        loss.backward();
        opt->step();
      }
      for (const Tensor* p : {&w, &b}) {
        const Tensor copy = amp::fresh_weight_copy(*p);
        if (!c.fused_adamw) {
          CHECK_FALSE(copy.defined());  // the composed step does not write it: the next forward casts again
          continue;
        }
        REQUIRE(copy.defined());
        CHECK(copy.dtype() == c.dtype);
        CHECK(as_floats(copy) == as_floats(p->detach().to(c.dtype)));
      }
    }
    // Under autocast the layer reads the copies: the same output as casting the parameters by hand.
    Tensor got, want;
    {
      amp::AutocastGuard autocast(c.dtype);
      got = F::linear(x, w, b);
    }
    {
      NoGradGuard no_grad;
      want = F::linear(x.to(c.dtype), w.detach().to(c.dtype), b.detach().to(c.dtype));
    }
    CHECK(as_floats(got) == as_floats(want));
    amp::clear_weight_cache();
  }
}

TEST_CASE("amp_weight_cache: a parameter changed outside the step, or cast to another dtype, is cast again") {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  Tensor w = full({1, 2}, 1.0).requires_grad_();
  const Tensor x = ones({1, 2});
  auto out = [&](DType t) {
    amp::AutocastGuard autocast(t);
    return F::linear(x, w).to(kF32).item<float>();
  };
  CHECK(out(kF16) == 2.0f);
  {
    NoGradGuard no_grad;
    w.mul_(3.0);
  }
  CHECK(out(kF16) == 6.0f);
  CHECK(out(kBF16) == 6.0f);
  CHECK(amp::fresh_weight_copy(w).dtype() == kBF16);  // one copy a parameter, the last dtype asked for
  nn::Linear layer(2, 1, false);
  {
    amp::AutocastGuard autocast(kF16);
    (void)layer.forward(x);  // the copy of the initial weight
  }
  NamedTensors state;
  state.emplace_back("weight", full({1, 2}, 0.25));
  layer.load_state_dict(state);
  {
    amp::AutocastGuard autocast(kF16);
    CHECK(layer.forward(x).to(kF32).item<float>() == 0.5f);
  }
  // Module::to gives the parameter a new storage, whose version may be the old one's.
  nn::Linear moved(64, 1, false);
  const Tensor xs = ones({1, 64});
  const auto forward = [&] {
    amp::AutocastGuard autocast(kF16);
    return as_floats(moved.forward(xs));
  };
  (void)forward();
  const uint64_t version = moved.weight.version();
  moved.to(kBF16);
  moved.to(kF32);  // the weights rounded to bf16: their f16 copies change
  while (moved.weight.version() < version) moved.weight.bump_version();
  REQUIRE(moved.weight.version() == version);
  Tensor want;
  {
    NoGradGuard no_grad;
    want = F::linear(xs.to(kF16), moved.weight.to(kF16));
  }
  CHECK(forward() == as_floats(want));
  amp::clear_weight_cache();
}

TEST_CASE("amp_weight_cache: a graph that saved a copy raises when the step rewrote it before its backward") {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  Tensor w = randn({4, 3}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  const Tensor x = randn({2, 3}).requires_grad_();
  auto forward = [&] {
    amp::AutocastGuard autocast(kBF16);
    return sum(F::linear(x, w).to(kF32));
  };
  forward().backward();
  opt.step();  // the copy now exists and this step rewrote it
  const Tensor loss = forward();
  loss.backward(Tensor(), true);
  opt.step();
  CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("modified by an in-place operation"), Error);
  amp::clear_weight_cache();
}

TEST_CASE("amp_weight_cache: the copies of dead parameters go, and turning the switch off drops them all") {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  amp::clear_weight_cache();
  const Tensor x = ones({3, 4});
  {
    nn::Linear a(4, 5), b(4, 6);
    amp::AutocastGuard autocast(kF16);
    (void)a.forward(x);
    (void)b.forward(x);
    CHECK(amp::weight_cache_size() == 4);
  }
  CHECK(amp::weight_cache_size() == 0);  // their parameters died
  nn::Linear c(4, 2);
  {
    amp::AutocastGuard autocast(kF16);
    (void)c.forward(x);
  }
  CHECK(amp::weight_cache_size() == 2);
  toggles::set_amp_weight_cache(false);
  CHECK(amp::weight_cache_size() == 0);
  {
    amp::AutocastGuard autocast(kF16);
    (void)c.forward(x);
  }
  CHECK(amp::weight_cache_size() == 0);  // off: nothing is kept past the region
}

TEST_CASE("amp_weight_cache: one multi-tensor step rewrites copies of two dtypes") {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  toggles::Scoped multi(toggles::Toggle::multi_tensor_step, true);
  manual_seed(4);
  Tensor a = randn({3, 5}).requires_grad_(), b = randn({1, 5}).requires_grad_(), c = randn({2, 5}).requires_grad_();
  optim::SGD opt({a, b, c}, {.lr = 0.1, .momentum = 0.5});
  const Tensor x = randn({4, 5});
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    Tensor loss = sum(b * b);  // b: no copy, between the two
    for (const auto& [p, t] : {std::pair{&a, kF16}, std::pair{&c, kBF16}}) {
      amp::AutocastGuard autocast(t);
      loss = loss + sum(F::linear(x, *p).to(kF32));
    }
    loss.backward();
    opt.step();
    CHECK(as_floats(amp::fresh_weight_copy(a)) == as_floats(a.detach().to(kF16)));
    CHECK(as_floats(amp::fresh_weight_copy(c)) == as_floats(c.detach().to(kBF16)));
    CHECK_FALSE(amp::fresh_weight_copy(b).defined());
  }
  amp::clear_weight_cache();
}
