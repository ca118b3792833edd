// nn::summary: rows, output shapes from a real forward, parameter totals, state left untouched.
#include <doctest/doctest.h>

#include <string>

#include "mdl.h"
#include "tests/support/tied_modules.h"
#include "nn/models/models.h"
#include "nn/summary.h"

using namespace mdl;
namespace M = mdl::nn::models;

namespace {
// The row that starts (after indentation) with `layer`, or "" when there is none.
std::string row(const std::string& table, const std::string& layer) {
  size_t at = table.find("\n" + layer + " ");
  if (at == std::string::npos) at = table.find(" " + layer + " (");
  if (at == std::string::npos) return "";
  size_t end = table.find('\n', at + 1);
  return table.substr(at + 1, end - at - 1);
}
}  // namespace

TEST_CASE("summary: SimpleCNN rows carry output shapes and parameter counts") {
  manual_seed(3);
  auto m = M::SimpleCNN(1, 10, 28);
  const std::string t = nn::summary(*m, randn({2, 1, 28, 28}));
  CHECK(row(t, "features.0").find("[2, 32, 28, 28]") != std::string::npos);
  CHECK(row(t, "features.0").find("320") != std::string::npos);  // 32*1*3*3 + 32
  CHECK(row(t, "features.2").find("[2, 32, 14, 14]") != std::string::npos);
  CHECK(row(t, "features.5").find("[2, 64, 7, 7]") != std::string::npos);
  CHECK(row(t, "classifier.1").find("401,536") != std::string::npos);  // 3136*128 + 128
  CHECK(row(t, "classifier.3").find("[2, 10]") != std::string::npos);
  CHECK(row(t, "features").find("--") != std::string::npos);  // a container owns none
  CHECK(t.find("Total params: 421,642") != std::string::npos);
  CHECK(t.find("Trainable params: 421,642") != std::string::npos);
  CHECK(t.find("Non-trainable params: 0") != std::string::npos);
}

TEST_CASE("summary: max_depth folds children into their parent's count") {
  auto m = M::SimpleCNN(1, 10, 28);
  const std::string t = nn::summary(*m, randn({1, 1, 28, 28}), {.max_depth = 1});
  CHECK(row(t, "features.0") == "");
  CHECK(row(t, "features").find("[1, 64, 7, 7]") != std::string::npos);
  CHECK(row(t, "features").find("18,816") != std::string::npos);  // 320 + 18,496
  CHECK(row(t, "classifier").find("402,826") != std::string::npos);
}

TEST_CASE("summary: ResNet-18 blocks and a frozen layer; BatchNorm statistics untouched") {
  manual_seed(4);
  auto m = M::resnet18(10, 3);
  m->named_parameters()[0].second.requires_grad_(false);  // conv1.weight: 3*64*3*3 = 1,728
  auto rm = m->named_buffers()[0].second.clone();
  const std::string t = nn::summary(*m, randn({2, 3, 32, 32}));
  CHECK(row(t, "layer1.0.conv1").find("[2, 64, 32, 32]") != std::string::npos);
  CHECK(row(t, "layer2.0.downsample").find("[2, 128, 16, 16]") != std::string::npos);
  CHECK(row(t, "fc").find("[2, 10]") != std::string::npos);
  CHECK(t.find("Total params: 11,173,962") != std::string::npos);
  CHECK(t.find("Non-trainable params: 1,728") != std::string::npos);
  CHECK(allclose(m->named_buffers()[0].second, rm, 0, 0));
  CHECK(m->is_training());
}

TEST_CASE("summary: transformer layers report attention outputs") {
  manual_seed(5);
  auto m = std::make_shared<M::ViT>(M::ViTOptions{.image_size = 8,
                                                  .patch_size = 4,
                                                  .in_channels = 1,
                                                  .classes = 3,
                                                  .dim = 16,
                                                  .depth = 1,
                                                  .heads = 2,
                                                  .mlp_dim = 32});
  const std::string t = nn::summary(*m, randn({2, 1, 8, 8}));
  CHECK(row(t, "embed").find("[2, 5, 16]") != std::string::npos);  // 4 patches + the class token
  CHECK(row(t, "layers.0.self_attn").find("[2, 5, 16]") != std::string::npos);
  CHECK(row(t, "head").find("[2, 3]") != std::string::npos);
}

TEST_CASE("summary: a wrong input shape throws and leaves the model as it was") {
  auto m = M::SimpleCNN(1, 10, 28);
  CHECK_THROWS_AS(nn::summary(*m, randn({2, 3, 28, 28})), Error);
  CHECK(m->is_training());
  const std::string t = nn::summary(*m, randn({1, 1, 28, 28}));  // the observer was restored
  CHECK(row(t, "classifier.3").find("[1, 10]") != std::string::npos);
}

TEST_CASE("summary: a submodule left in eval mode under a training model stays in eval mode") {
  auto bn = std::make_shared<nn::BatchNorm2d>(2);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Conv2d>(2, 2, 1));
  m->push_back(bn);
  m->train();
  bn->eval();
  nn::summary(*m, randn({1, 2, 4, 4}));
  CHECK(m->is_training());
  CHECK_FALSE(bn->is_training());
  const Tensor running_mean = bn->named_buffers()[0].second.clone();
  (*m)(randn({4, 2, 4, 4}) + 5.0);
  CHECK(allclose(bn->named_buffers()[0].second, running_mean, 0, 0));  // frozen statistics untouched
}

TEST_CASE("summary: a model that no shared_ptr owns") {
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(4, 3));
  model.push_back(std::make_shared<nn::ReLU>());
  const std::string t = nn::summary(model, randn({2, 4}));
  CHECK(row(t, "0").find("[2, 3]") != std::string::npos);
  CHECK(row(t, "0").find("15") != std::string::npos);
  CHECK(t.find("Total params: 15") != std::string::npos);
}

using tied_test::Outer;

TEST_CASE("summary: a module registered twice is listed and counted once") {
  auto m = std::make_shared<Outer>();
  const std::string t = nn::summary(*m, randn({1, 4}));
  CHECK(row(t, "s").find("--") != std::string::npos);  // its one child holds all it has
  CHECK(row(t, "s.a").find("20") != std::string::npos);
  CHECK(row(t, "s.b") == "");
  CHECK(row(t, "l").find("10") != std::string::npos);
  CHECK(t.find("-20") == std::string::npos);
  CHECK(t.find("Total params: 30") != std::string::npos);

  const std::string folded = nn::summary(*m, randn({1, 4}), {.max_depth = 1});
  CHECK(row(folded, "s").find("20") != std::string::npos);
  CHECK(row(folded, "l").find("10") != std::string::npos);
}

namespace {
// A model that registers a parameter itself (a learned scale) beside a child layer.
struct Scaled : nn::Module {
  Tensor scale = register_parameter("scale", ones({3}));
  std::shared_ptr<nn::Linear> fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
  Scaled() : Module("Scaled") {}
  Tensor forward(const Tensor& x) override { return (*fc)(x)*scale; }
};
}  // namespace

TEST_CASE("summary: parameters the model registers itself have a row, so the column sums to the total") {
  auto m = std::make_shared<Scaled>();
  const std::string t = nn::summary(*m, randn({2, 4}));
  CHECK(row(t, "(Scaled's own)").find("[2, 3]") != std::string::npos);
  CHECK(row(t, "(Scaled's own)").find("  3") != std::string::npos);
  CHECK(row(t, "fc").find("15") != std::string::npos);
  CHECK(t.find("Total params: 18") != std::string::npos);
}
