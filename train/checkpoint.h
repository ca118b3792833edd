// A training checkpoint (mdl-train --save, --resume; the SaveCheckpoint callback): the model's
// weights in a safetensors file, and beside it (CHECKPOINT.train.safetensors) the optimizer and
// loss-scaler state, both tagged with the epochs done and the caller's tags (mdl-train's: the
// model and the data). The state file also records the weights file's size and CRC-32
// ("model_bytes", "model_crc32"), which tie the two into one checkpoint, the optimizer's kind, the
// default generator's seed and offset (dropout and random init draw from it; a resumed run draws
// what the straight run would have), when given the LR schedule's position, and the callbacks'
// state (TrainContext::callback_state: EarlyStopping's and ReduceLROnPlateau's counts).
//
// The pair is crash-consistent: both files are written complete and fsynced under staged names
// (PATH.new.PID and PATH.train.safetensors.new.PID), then renamed into place, the weights first,
// each rename made durable. A crash before the first rename leaves the previous pair; one between
// the renames leaves the new weights beside the previous state file and the new state file
// staged, which resume_checkpoint takes (and renames into place). Each save then removes the
// staged and temporary files of PATH that writers on this machine which are gone (killed) left.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "amp/grad_scaler.h"
#include "io/safetensors.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"

namespace mdl::train {

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& opt,
                     const amp::GradScaler& scaler, int64_t epoch, const io::Metadata& tags = {},
                     const optim::LRScheduler* schedule = nullptr, const io::Metadata& callback_state = {});

// Loads the model, the optimizer and (when enabled and saved) the scaler; returns the epochs
// done. A missing state file, a malformed epoch, or a weights file that is not the one the state
// file was written with (a torn pair) is an mdl::Error naming the files, raised before anything
// is loaded. A schedule given is set to the saved position (its steps taken, skipped ones as they
// were counted); a file that predates the position (or was saved without a schedule) sets it to
// epochs x steps_per_epoch, one step per batch, and refuses when steps_per_epoch is 0. When the
// state file is missing or belongs to other weights, a staged state file written for these weights
// (a save interrupted between its renames) is renamed into place and used. callback_state, when
// given, receives the callbacks' state the checkpoint recorded (for Trainer::resume_after).
int64_t resume_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& opt, amp::GradScaler& scaler,
                          optim::LRScheduler* schedule = nullptr, int64_t steps_per_epoch = 0,
                          io::Metadata* callback_state = nullptr);

namespace detail {
// Called by save_checkpoint after each of its steps ("weights staged", "state staged", "weights
// renamed", "state renamed") with the step's name: tests look at the files a crash there leaves.
extern std::function<void(std::string_view step)> checkpoint_step_hook;
}  // namespace detail

}  // namespace mdl::train
