// What mdl-train builds from its options: the datasets (with the transform each needs), their
// loaders, the model sized to the data, the optimizer with its weight-decay groups, and the LR
// schedule.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"
#include "tools/mdl_train/options.h"

namespace mdl::train {

struct DataBundle {
  std::shared_ptr<data::Dataset> train, test;  // test may be null (no held-out split)
  data::TransformPtr transform;                // u8 image -> normalised f32 CHW; null for text
  data::TransformPtr train_transform;          // the training loader's: transform, after augmentation with --augment
  int64_t channels = 1, image_size = 28, classes = 10;
  int64_t vocab = 0, context = 0;  // text
  std::vector<std::string> class_names;
  std::string description;
};

DataBundle make_data(const TrainOptions& o);
// The training loader's options: batch, shuffle, workers, prefetch, cache, pinned memory, seed
// and the data's transform.
data::LoaderOptions make_loader_options(const TrainOptions& o, const DataBundle& d);
// The held-out split's loader: the training loader's options with batches of at least 256, in
// order; null without a held-out split.
std::unique_ptr<data::DataLoader> make_validation_loader(const TrainOptions& o, const DataBundle& d,
                                                         const data::LoaderOptions& train);
nn::ModulePtr make_model(const TrainOptions& o, const DataBundle& d);
// One sample of zeros shaped as the model's input (for nn::summary).
Tensor example_input(const DataBundle& d);
// Weight decay skips biases and norm parameters (param_groups_no_decay).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, nn::Module& model);
// Stepped once per optimizer step; null for --schedule none.
std::unique_ptr<optim::LRScheduler> make_schedule(const TrainOptions& o, optim::Optimizer& opt,
                                                  int64_t steps_per_epoch);
// The weights --l2 penalises: every Linear layer's weight (the dense layers, as the Keras
// kernel_regularizer of the reports this project grew from).
std::vector<Tensor> dense_weights(nn::Module& model);

}  // namespace mdl::train
