// MLP, SimpleCNN and SeparableCNN.
#include <functional>

#include "nn/models/models.h"

namespace mdl::nn::models {

std::shared_ptr<Sequential> MLP(int64_t in, const std::vector<int64_t>& hidden, int64_t out, double dropout) {
  auto m = std::make_shared<Sequential>();
  m->push_back(std::make_shared<Flatten>());
  int64_t width = in;
  for (int64_t h : hidden) {
    m->push_back(std::make_shared<Linear>(width, h));
    m->push_back(std::make_shared<ReLU>());
    if (dropout > 0) m->push_back(std::make_shared<Dropout>(dropout));
    width = h;
  }
  m->push_back(std::make_shared<Linear>(width, out));
  return m;
}

namespace {

// conv1 (3x3, 32)-ReLU-MaxPool(2), conv2-ReLU-MaxPool(2), Flatten, Linear(128)-ReLU, Linear(classes).
// Layers are made (and initialised from the generator) in order, so a seed gives the same weights.
std::shared_ptr<Sequential> small_cnn(int64_t in_channels, int64_t classes, int64_t image_size,
                                      const std::function<ModulePtr()>& make_conv2, const char* name) {
  MDL_CHECK(image_size % 4 == 0, name, ": image_size ", image_size, " must be a multiple of 4");
  auto conv1 = std::make_shared<Conv2d>(in_channels, 32, 3, Conv2dOptions{.padding = {1, 1}});
  auto features = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      conv1,
      std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2),
      make_conv2(),
      std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2),
  });
  int64_t s = image_size / 4;
  auto classifier = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Flatten>(),
      std::make_shared<Linear>(64 * s * s, 128),
      std::make_shared<ReLU>(),
      std::make_shared<Linear>(128, classes),
  });
  auto m = std::make_shared<Sequential>();
  m->push_back("features", features);
  m->push_back("classifier", classifier);
  return m;
}

}  // namespace

std::shared_ptr<Sequential> SimpleCNN(int64_t in_channels, int64_t classes, int64_t image_size) {
  return small_cnn(
      in_channels, classes, image_size,
      [] {
        return std::make_shared<Conv2d>(32, 64, 3, Conv2dOptions{.padding = {1, 1}});
      },
      "SimpleCNN");
}

std::shared_ptr<Sequential> SeparableCNN(int64_t in_channels, int64_t classes, int64_t image_size) {
  return small_cnn(
      in_channels, classes, image_size,
      [] {
        return std::make_shared<SeparableConv2d>(32, 64, 3, SeparableConv2dOptions{.padding = {1, 1}});
      },
      "SeparableCNN");
}

}  // namespace mdl::nn::models
