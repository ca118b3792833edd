// Validation after each epoch: the model in eval mode, without gradients, under the same
// autocast as training, over the whole held-out split: its mean loss, accuracy, macro-F1 and
// confusion matrix. Any LossFn; accuracy and the confusion matrix only for classification batches.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "amp/amp_config.h"
#include "data/loader.h"
#include "nn/module.h"
#include "tensor/device.h"
#include "train/loss_fn.h"

namespace mdl::train {

struct Validation {
  double loss = NAN, accuracy = NAN, macro_f1 = NAN;  // NaN for an empty split
  std::string confusion;                              // printed, rows labelled with names
};

// Leaves the model in training mode. classes 0: the logits' last dimension.
Validation validate(nn::Module& model, data::DataLoader& loader, Device device, const amp::AmpConfig& amp,
                    int64_t classes, const std::vector<std::string>& names, const LossFn& loss = cross_entropy_loss);

}  // namespace mdl::train
