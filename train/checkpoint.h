// A training checkpoint (mdl-train --save, --resume; the SaveCheckpoint callback): the model's
// weights in a safetensors file, and beside it (CHECKPOINT.train.safetensors) the optimizer and
// loss-scaler state, both tagged with the epochs done and the caller's tags (mdl-train's: the
// model and the data). The state file also records the weights file's size and CRC-32
// ("model_bytes", "model_crc32"), which tie the two into one checkpoint, the optimizer's kind, the
// default generator's seed and offset (dropout and random init draw from it; a resumed run draws
// what the straight run would have), and, when given, the LR schedule's position.
#pragma once
#include <cstdint>
#include <string>

#include "amp/grad_scaler.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"

namespace mdl::train {

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& opt,
                     const amp::GradScaler& scaler, int64_t epoch, const io::Metadata& tags = {},
                     const optim::LRScheduler* schedule = nullptr);

// Loads the model, the optimizer and (when enabled and saved) the scaler; returns the epochs
// done. A missing state file, a malformed epoch, or a weights file that is not the one the state
// file was written with (a torn pair) is an mdl::Error naming the files, raised before anything
// is loaded. A schedule given is set to the saved position (its steps taken, skipped ones as they
// were counted); a file that predates the position (or was saved without a schedule) sets it to
// epochs x steps_per_epoch, one step per batch, and refuses when steps_per_epoch is 0.
int64_t resume_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler,
                          optim::LRScheduler* schedule = nullptr, int64_t steps_per_epoch = 0);

}  // namespace mdl::train
