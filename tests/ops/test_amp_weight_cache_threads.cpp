// The weight cache is process-wide: models training on several threads at once under autocast find,
// add, rewrite and drop their copies in it concurrently, and each trains to the bits it reaches
// alone. Built into the ThreadSanitizer run.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "ops/autocast.h"
#include "switches/list/toggles.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

// A two-layer MLP trained for a few SGD steps under autocast bf16; a fresh model every round, so
// that the cache also drops the copies of dead parameters while other threads use it.
std::vector<float> train_mlps(uint64_t seed) {
  std::vector<float> losses;
  for (int round = 0; round < 3; ++round) {
    Generator g(seed + uint64_t(round));
    Tensor w1 = (randn({16, 8}, TensorOptions(kF32), &g) * 0.3).requires_grad_();
    Tensor w2 = (randn({4, 16}, TensorOptions(kF32), &g) * 0.3).requires_grad_();
    const Tensor x = randn({32, 8}, TensorOptions(kF32), &g), y = randint(0, 4, {32}, TensorOptions(kI64), &g);
    optim::SGD opt({w1, w2}, {.lr = 0.2, .momentum = 0.9});
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      Tensor logits;
      {
        amp::AutocastGuard autocast(kBF16);
        logits = F::linear(relu(F::linear(x, w1)), w2);
      }
      Tensor loss = F::cross_entropy(logits.to(kF32), y);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<float>());
    }
  }
  return losses;
}

}  // namespace

TEST_CASE("amp_weight_cache: models on several threads share the cache and train to their own bits") {
  toggles::Scoped weights(toggles::Toggle::amp_weight_cache, true);
  std::vector<std::vector<float>> alone;
  for (uint64_t s = 0; s < 3; ++s) alone.push_back(train_mlps(10 * s));
  std::vector<std::vector<float>> together(3);
  std::vector<std::thread> threads;
  for (uint64_t s = 0; s < 3; ++s) threads.emplace_back([&, s] { together[s] = train_mlps(10 * s); });
  for (std::thread& t : threads) t.join();
  for (size_t s = 0; s < 3; ++s) {
    CAPTURE(s);
    CHECK(together[s] == alone[s]);
  }
  amp::clear_weight_cache();
  CHECK(amp::weight_cache_size() == 0);
}
