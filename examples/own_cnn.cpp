// Your own CNN on Fashion-MNIST, trained with train::Trainer: early stopping on the validation
// loss and the best weights kept in own_cnn.safetensors.
//   own_cnn [EPOCHS] [SAMPLES]   (defaults: 10 epochs, all 60,000 training images (SAMPLES 0); SAMPLES also
//                                 limits the validation images)
#include <cstdio>
#include <string>

#include "examples/args.h"
#include "mdl.h"

using namespace mdl;

// conv(1->16)-ReLU-pool, conv(16->32)-ReLU-pool, then a linear classifier: 28x28 -> 7x7 -> 10.
class OwnCNN : public nn::Module {
 public:
  OwnCNN() : Module("OwnCNN") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 16, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(16, 32, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    pool = register_module("pool", std::make_shared<nn::MaxPool2d>(2));
    fc = register_module("fc", std::make_shared<nn::Linear>(32 * 7 * 7, 10));
  }
  Tensor forward(const Tensor& x) override {           // x: (B, 1, 28, 28)
    Tensor h = (*pool)(relu((*conv1)(x)));             // (B, 16, 14, 14)
    h = (*pool)(relu((*conv2)(h)));                    // (B, 32, 7, 7)
    return (*fc)(h.reshape({h.size(0), 32 * 7 * 7}));  // (B, 10)
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::MaxPool2d> pool;
  std::shared_ptr<nn::Linear> fc;
};

int main(int argc, char** argv) try {
  const examples::Args args{argc, argv, "own_cnn", "[EPOCHS] [SAMPLES]"};
  args.at_most(2);
  const int64_t epochs = args.count(1, "EPOCHS", 10, 1, 1'000'000);
  const int64_t samples = args.count(2, "SAMPLES", 0, 0, int64_t(1) << 40);
  manual_seed(0);
  std::shared_ptr<const data::Dataset> train_set = std::make_shared<data::FashionMNIST>(data::kFashionMnistRoot, true);
  std::shared_ptr<const data::Dataset> val_set = std::make_shared<data::FashionMNIST>(data::kFashionMnistRoot, false);
  if (samples > 0) train_set = std::make_shared<data::Subset>(train_set, samples);
  if (samples > 0) val_set = std::make_shared<data::Subset>(val_set, samples);
  auto normalize = std::make_shared<data::Compose>(std::vector<data::TransformPtr>{
      std::make_shared<data::ToTensor>(),
      std::make_shared<data::Normalize>(std::vector<double>{0.2860}, std::vector<double>{0.3530})});

  auto model = std::make_shared<OwnCNN>();
  train::Trainer trainer({
      .model = model,
      .optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-3}),
      .train = std::make_shared<data::DataLoader>(
          *train_set, data::LoaderOptions{.batch_size = 64, .shuffle = true, .transform = normalize}),
      .validation = std::make_shared<data::DataLoader>(*val_set,
                                                       data::LoaderOptions{.batch_size = 256, .transform = normalize}),
  });
  auto best = std::make_shared<train::CheckpointBest>("own_cnn.safetensors", "val_loss");
  trainer.add(std::make_shared<train::ProgressPrinter>(stdout))
      .add(std::make_shared<train::EarlyStopping>(train::EarlyStoppingOptions{.patience = 3}))
      .add(best);
  const auto history = trainer.fit(epochs);

  const std::string stopped = trainer.stop_reason().empty() ? "" : "; " + trainer.stop_reason();
  if (best->saves() > 0)
    std::printf("%zu epochs; best val loss %.4f at epoch %lld, saved to own_cnn.safetensors%s\n", history.size(),
                best->best(), (long long)best->best_epoch(), stopped.c_str());
  else
    std::printf("%zu epochs; no epoch had a finite val loss, so nothing was saved%s\n", history.size(),
                stopped.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "own_cnn: %s\n", e.what());
  return 1;
}
