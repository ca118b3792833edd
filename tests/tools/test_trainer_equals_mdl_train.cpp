// mdl-train is a Trainer and nothing more: run_training from its options, and a program that
// assembles the same Trainer by hand from the library (data, transform, model, optimizer, loaders,
// schedule, mixed precision, accumulation, clipping, L2), train the same losses, accuracies and
// weights, bit for bit.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <unistd.h>

#include "tests/support/data_test_util.h"
#include "io/safetensors.h"
#include "mdl.h"
#include "tests/support/test_util.h"
#include "tools/mdl_train/run_training.h"

using namespace mdl;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mdl_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// The same run as `mdl-train --data fashion-mnist:ROOT --model mlp --subset 512 --batch 64 --epochs 2 --seed 3
// --amp bf16 --grad-accum 2 --clip 1 --l2 1e-4 --weight-decay 0.01 --schedule cosine`, written with the
// library alone.
std::vector<train::EpochRecord> train_by_hand(nn::ModulePtr& model, const std::string& root) {
  manual_seed(3);
  auto train_set = std::make_shared<data::Subset>(std::make_shared<data::FashionMNIST>(root, true), 512,
                                                  data::Subset::Pick::First);
  auto test_set = std::make_shared<data::FashionMNIST>(root, false);
  auto transform = std::make_shared<data::Compose>(std::vector<data::TransformPtr>{
      std::make_shared<data::ToTensor>(),
      std::make_shared<data::Normalize>(std::vector<double>{0.2860}, std::vector<double>{0.3530})});
  model = nn::models::MLP(28 * 28, {256, 128}, 10);
  auto opt = std::make_shared<optim::AdamW>(optim::param_groups_no_decay(model->named_parameters(), 0.01),
                                            optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.01});
  auto train_loader = std::make_shared<data::DataLoader>(
      *train_set, data::LoaderOptions{.batch_size = 64, .shuffle = true, .seed = 3, .transform = transform});
  auto val_loader = std::make_shared<data::DataLoader>(
      *test_set, data::LoaderOptions{.batch_size = 256, .shuffle = false, .seed = 3, .transform = transform});
  auto schedule = std::make_shared<optim::CosineAnnealingLR>(*opt, 2 * train_loader->size());
  std::vector<Tensor> dense;
  for (auto& [name, m] : model->named_modules())
    if (auto* linear = dynamic_cast<nn::Linear*>(m.get())) dense.push_back(linear->weight);
  train::Trainer trainer({.model = model,
                          .optimizer = opt,
                          .train = train_loader,
                          .validation = val_loader,
                          .schedule = schedule,
                          .amp = {kBF16},
                          .grad_accum = 2,
                          .clip = 1,
                          .l2 = 1e-4,
                          .l2_weights = dense,
                          .classes = 10});
  return trainer.fit(2);
}

}  // namespace

TEST_CASE("mdl-train and a Trainer assembled by hand give the same losses and weights, bit for bit") {
  const std::string ckpt = temp_path("one_loop.safetensors");
  // Both runs evaluate the test split twice: under a sanitizer, its first 300 images (a full and a
  // partial batch) stand in for the 10,000.
  std::optional<data_test::FashionMnistHead> head;
  if (test::kSanitized) head.emplace(512, 300);
  const std::string root = head ? head->root() : data::kFashionMnistRoot;
  const train::TrainOptions o = train::parse_train_options({"--data",         "fashion-mnist:" + root,
                                                            "--model",        "mlp",
                                                            "--subset",       "512",
                                                            "--batch",        "64",
                                                            "--epochs",       "2",
                                                            "--seed",         "3",
                                                            "--amp",          "bf16",
                                                            "--grad-accum",   "2",
                                                            "--clip",         "1",
                                                            "--l2",           "1e-4",
                                                            "--weight-decay", "0.01",
                                                            "--schedule",     "cosine",
                                                            "--save",         ckpt,
                                                            "--no-progress"});
  const train::TrainReport tool = train::run_training(o, nullptr);

  nn::ModulePtr model;
  const std::vector<train::EpochRecord> hand = train_by_hand(model, root);

  REQUIRE(tool.epochs.size() == 2);
  REQUIRE(hand.size() == 2);
  for (size_t e = 0; e < 2; ++e) {
    CAPTURE(e);
    CHECK(hand[e].train_loss == tool.epochs[e].train_loss);
    CHECK(hand[e].train_accuracy == tool.epochs[e].train_accuracy);
    CHECK(hand[e].val_loss == tool.epochs[e].val_loss);
    CHECK(hand[e].val_accuracy == tool.epochs[e].val_accuracy);
    CHECK(hand[e].lr == tool.epochs[e].lr);
  }
  CHECK(tool.epochs[1].train_loss < tool.epochs[0].train_loss);  // it trained

  const io::SafetensorsContents saved = io::read_safetensors(ckpt);
  const NamedTensors by_hand = model->state_dict();
  REQUIRE(saved.tensors.size() == by_hand.size());
  for (size_t i = 0; i < by_hand.size(); ++i) {
    CAPTURE(by_hand[i].first);
    CHECK(saved.tensors[i].first == by_hand[i].first);
    CHECK(saved.tensors[i].second.to_vector<float>() == by_hand[i].second.to_vector<float>());
  }
  std::remove(ckpt.c_str());
  std::remove((ckpt + ".train.safetensors").c_str());
}
