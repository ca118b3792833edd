// mdl-train's checkpoints (--save, --resume): the model's weights in a safetensors file, and
// beside it (CHECKPOINT.train.safetensors) the optimizer and loss-scaler state, both tagged
// with the epochs done, the model and the data.
#pragma once
#include <cstdint>
#include <string>

#include "amp/grad_scaler.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "train/options.h"

namespace mdl::train {

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& opt,
                     const amp::GradScaler& scaler, const TrainOptions& o, int64_t epoch);

// Loads the model and, when its state file exists, the optimizer and scaler; returns the epochs
// done (0 without a state file).
int64_t resume_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler);

}  // namespace mdl::train
