// Training written out by hand, without train::Trainer: the loop every framework hides. Each
// step is forward, loss, backward, update, print, as llm.c's train_gpt2.c does it, on
// Fashion-MNIST with a two-layer MLP; every VAL_EVERY steps the validation loss.
//   hand_loop [STEPS] [SAMPLES]   (defaults: 1000 steps, all 60,000 training images (SAMPLES 0))
#include <chrono>
#include <cstdio>
#include <string>

#include "examples/args.h"
#include "mdl.h"

using namespace mdl;

constexpr int64_t kBatch = 64, kValEvery = 100, kValBatches = 10;

// The mean loss over the first kValBatches batches of the held-out split, without gradients.
double validation_loss(nn::Module& model, data::DataLoader& val) {
  NoGradGuard no_grad;
  model.eval();
  double sum = 0;
  int64_t batches = 0;
  for (auto& [x, y] : val) {
    sum += nn::functional::cross_entropy(model(x), y).item<double>();
    if (++batches == kValBatches) break;
  }
  model.train();
  return sum / double(batches);
}

int main(int argc, char** argv) try {
  const examples::Args args{argc, argv, "hand_loop", "[STEPS] [SAMPLES]"};
  args.at_most(2);
  const int64_t steps = args.count(1, "STEPS", 1000, 1, 1'000'000'000);
  const int64_t samples = args.count(2, "SAMPLES", 0, 0, int64_t(1) << 40);
  manual_seed(0);
  std::shared_ptr<const data::Dataset> train_set = std::make_shared<data::FashionMNIST>(data::kFashionMnistRoot, true);
  data::FashionMNIST val_set(data::kFashionMnistRoot, false);
  if (samples > 0) train_set = std::make_shared<data::Subset>(train_set, samples);
  data::DataLoader loader(*train_set, {.batch_size = kBatch, .shuffle = true});  // x: (B, 1, 28, 28) in [0, 1]
  data::DataLoader val(val_set, {.batch_size = 256});

  auto model = nn::models::MLP(28 * 28, {128}, 10);  // Flatten, Linear(784, 128), ReLU, Linear(128, 10)
  optim::AdamW optimizer(model->parameters(), {.lr = 1e-3});

  int64_t step = 0;
  for (int64_t epoch = 0; step < steps; ++epoch) {
    loader.set_epoch(epoch);  // a new shuffle each epoch
    for (auto& [x, y] : loader) {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor logits = (*model)(x);                             // forward: (B, 10)
      Tensor loss = nn::functional::cross_entropy(logits, y);  // the batch's mean loss
      optimizer.zero_grad();                                   // forget the last step's gradients
      loss.backward();                                         // backward: every parameter's .grad
      optimizer.step();                                        // update
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %4lld/%lld: train loss %.6f (%.2f ms, %.0f images/s)\n", (long long)(step + 1),
                  (long long)steps, loss.item<double>(), ms, double(x.size(0)) * 1000.0 / ms);
      if (++step % kValEvery == 0 || step == steps) std::printf("val loss %.6f\n", validation_loss(*model, val));
      if (step == steps) break;
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "hand_loop: %s\n", e.what());
  return 1;
}
