// One optimizer step on one batch, the heart of training: the batch split into --grad-accum
// micro-batches, each forward under autocast with the loss (plus the --l2 penalty) weighted by
// its share of the batch, backward through the GradScaler's scale; then unscale and --clip,
// the scaler's step and update, and the LR schedule's step when the optimizer stepped. The loss
// is any LossFn (mdl-train's is cross-entropy); mdl-train and train::Trainer both step with it.
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
#include "train/loss_fn.h"
#include "train/options.h"

namespace mdl::train {

// An epoch's running sums, over the samples (or tokens) seen.
struct EpochTotals {
  double loss_sum = 0;
  int64_t seen = 0, correct = 0;
  int64_t classified = 0;  // of `seen`, those of classification batches (what accuracy is over)
};

struct StepOptions {
  int64_t grad_accum = 1;  // micro-batches per optimizer step
  double clip = 0;         // max global gradient norm; 0 = off
  double l2 = 0;           // a penalty l2 * sum(w^2) over the step's l2_weights, added to the loss
  bool autocast = false;
  DType amp_dtype = kF16;
};

class TrainStep {
 public:
  // schedule may be null; l2_weights: what StepOptions::l2 penalises.
  TrainStep(nn::Module& model, DataParallel& dp, optim::Optimizer& opt, amp::GradScaler& scaler,
            optim::LRScheduler* schedule, LossFn loss, StepOptions options, std::vector<Tensor> l2_weights = {});
  // mdl-train's: cross-entropy, --grad-accum, --l2 (on the dense weights) and --clip from o.
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
  LossFn loss_;
  StepOptions o_;
  std::vector<Tensor> l2_weights_;
  std::vector<Tensor> params_;  // what --clip measures
};

}  // namespace mdl::train
