// amp_weight_cache on CUDA: the multi-tensor steps write each parameter's 16-bit copy with the bits
// of the GPU's own cast, across launches of 24 tensors, with parameters without a copy in the same
// launch and copies of two dtypes in one step; and a GPT AMP step gives the same bits off and on with
// fewer copy kernels. Skipped without a GPU.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/api.h"
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
std::vector<float> as_floats(const Tensor& t) { return t.to(Device::cpu()).to(kF32).to_vector<float>(); }
}  // namespace

TEST_CASE("cuda: a multi-tensor step writes each copy with the bits of the GPU's cast" * MDL_CUDA_ONLY) {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  toggles::Scoped multi(toggles::Toggle::multi_tensor_step, true);
  const Device gpu = Device::cuda();
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::pair<const char*, Make> optimizers[] = {
      {"SGD with momentum",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
       }},
      {"AdamW", [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1});
       }}};
  for (const auto& [name, make] : optimizers) {
    CAPTURE(name);
    manual_seed(9);
    // 30 parameters (two launches), sizes from 1 to past a block's chunk; every third without a copy,
    // the rest cast to f16 or bf16 by turns.
    std::vector<Tensor> params;
    for (int i = 0; i < 30; ++i) params.push_back((randn({1, int64_t(1 + i * 2311)}) * 0.1).to(gpu).requires_grad_());
    std::unique_ptr<optim::Optimizer> opt = make(params);
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      opt->zero_grad();
      Tensor loss = zeros({}, TensorOptions(kF32, gpu));
      for (size_t i = 0; i < params.size(); ++i) {
        if (i % 3 == 2) {
          loss = loss + sum(params[i] * params[i]);
          continue;
        }
        amp::AutocastGuard autocast(i % 3 == 0 ? kF16 : kBF16);
        const Tensor& w = params[i];
        loss = loss + sum(F::linear(ones({1, w.size(1)}, TensorOptions(kF32, gpu)), w).to(kF32));
      }
      loss.backward();
      opt->step();
      for (size_t i = 0; i < params.size(); ++i) {
        CAPTURE(i);
        const Tensor copy = amp::fresh_weight_copy(params[i]);
        if (i % 3 == 2) {
          CHECK_FALSE(copy.defined());
          continue;
        }
        REQUIRE(copy.defined());
        CHECK(copy.dtype() == (i % 3 == 0 ? kF16 : kBF16));
        CHECK(as_floats(copy) == as_floats(params[i].detach().to(copy.dtype())));
      }
    }
    amp::clear_weight_cache();
  }
}

TEST_CASE("cuda: a GPT AMP step gives the same bits with the weight cache off and on, with fewer copies" *
          MDL_CUDA_ONLY) {
  const Device gpu = Device::cuda();
  auto run = [&](bool cache) {
    toggles::Scoped cached(toggles::Toggle::amp_weight_cache, cache);
    manual_seed(7);
    const nn::models::GPTOptions o{.context = 32, .n_layer = 2, .n_head = 2, .n_embd = 64};
    nn::models::GPT gpt(o);
    gpt.to(gpu);
    optim::AdamW opt(gpt.parameters(), {.lr = 3e-3});
    Generator g(8);
    const Tensor x = randint(0, o.vocab_size, {2, 32}, TensorOptions(kI64), &g).to(gpu);
    const Tensor y = randint(0, o.vocab_size, {2 * 32}, TensorOptions(kI64), &g).to(gpu);
    std::vector<float> losses;
    int64_t copies = 0;
    for (int s = 0; s < 3; ++s) {
      std::unique_ptr<profiler::Session> prof;
      if (s == 2) prof = std::make_unique<profiler::Session>(profiler::Options{.memory = false});
      opt.zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard autocast(kF16);
        const Tensor logits = gpt.forward(x);
        loss = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), y);
      }
      loss.backward();
      opt.step();
      losses.push_back(loss.item<float>());
      if (prof) {
        prof->stop();
        copies = int64_t(profiler_test::find_all(*prof, "copy", profiler::EventKind::Kernel).size());
      }
    }
    std::vector<std::vector<float>> weights;
    for (const Tensor& p : gpt.parameters()) weights.push_back(as_floats(p.detach()));
    amp::clear_weight_cache();
    return std::make_tuple(losses, weights, copies);
  };
  const auto [losses_off, weights_off, copies_off] = run(false);
  const auto [losses_on, weights_on, copies_on] = run(true);
  CHECK(losses_off == losses_on);
  CHECK(weights_off == weights_on);
  CAPTURE(copies_off);
  CHECK(copies_on == copies_off - (8 * 2 + 1));
}
