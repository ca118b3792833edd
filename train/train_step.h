// One optimizer step on one batch, the heart of training: the batch split into --grad-accum
// micro-batches, each forward under autocast with the loss (plus the --l2 penalty) weighted by
// its share of the batch, backward through the GradScaler's scale; then unscale and --clip,
// the scaler's step and update, and the LR schedule's step when the optimizer stepped.
#pragma once
#include <cstdint>
#include <vector>

#include "amp/grad_scaler.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/distributed.h"
#include "train/options.h"

namespace mdl::train {

// An epoch's running sums, over the samples (or tokens) seen.
struct EpochTotals {
  double loss_sum = 0;
  int64_t seen = 0, correct = 0;
};

class TrainStep {
 public:
  // Reads --grad-accum, --l2 and --clip from o; schedule may be null.
  TrainStep(const TrainOptions& o, nn::Module& model, DataParallel& dp, optim::Optimizer& opt, amp::GradScaler& scaler,
            optim::LRScheduler* schedule, bool autocast, DType amp_dtype);
  // x and y already on the model's device; adds the batch's loss and accuracy to totals.
  void operator()(const Tensor& x, const Tensor& y, EpochTotals& totals);

 private:
  nn::Module& model_;
  DataParallel& dp_;
  optim::Optimizer& opt_;
  amp::GradScaler& scaler_;
  optim::LRScheduler* schedule_;
  bool autocast_;
  DType amp_dtype_;
  int64_t grad_accum_;
  double l2_, clip_;
  std::vector<Tensor> l2_weights_;  // the dense layers' weights, when --l2
  std::vector<Tensor> params_;      // what --clip measures
};

}  // namespace mdl::train
