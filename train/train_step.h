// One optimizer step on one batch, the heart of training: the batch split into grad_accum
// micro-batches, each forward under autocast with the loss (plus an L2 penalty) weighted by
// its share of the batch, backward through the GradScaler's scale; then unscale and clip,
// the scaler's step and update, and the LR schedule's step when the optimizer stepped (with
// defer_totals, at every step: knowing whether the scaler skipped would wait for the GPU). The loss
// is any LossFn. train::Trainer steps with it; data parallel adds its hooks (data_parallel.h).
// With defer_totals the batch's loss and correct count are summed on the model's device and read
// by flush_totals(), so a step never waits for a GPU to finish: the host runs ahead and queues the
// next batch's kernels while the GPU works (the Trainer flushes when a callback asks, and at the
// epoch's end). With cuda_graph the step, AMP included, is captured once as a CUDA Graph after two
// eager warm-up steps and replayed for every batch of the same shapes: one launch per step instead
// of hundreds. A batch of other shapes (an epoch's last) runs eagerly; an lr
// changed by the schedule reaches the replay through Optimizer::sync_device_lr().
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "amp/amp_config.h"
#include "amp/grad_scaler.h"
#include "cuda/api.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedulers.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "train/data_parallel.h"
#include "train/loss_fn.h"

namespace mdl::train {

// An epoch's running sums, over the samples (or tokens) seen.
struct EpochTotals {
  double loss_sum = 0;
  int64_t seen = 0, correct = 0;
  int64_t classified = 0;  // of `seen`, those of classification batches (what accuracy is over)
};

struct StepOptions {
  int64_t grad_accum = 1;     // micro-batches per optimizer step
  double clip = 0;            // max global gradient norm; 0 = off
  double l2 = 0;              // a penalty l2 * sum(w^2) over the step's l2_weights, added to the loss
  amp::AmpConfig amp{};       // mixed precision: the forward under autocast in amp.dtype
  bool defer_totals = false;  // sum loss and correct count on the device until flush_totals()
  // Capture the step once as a CUDA Graph and replay it for every batch of the same shapes
  // (needs defer_totals: a replay cannot return values to the host).
  bool cuda_graph = false;
};

class TrainStep {
 public:
  // schedule may be null; l2_weights: what StepOptions::l2 penalises.
  TrainStep(nn::Module& model, DataParallel& dp, optim::Optimizer& opt, amp::GradScaler& scaler,
            optim::LRScheduler* schedule, LossFn loss, StepOptions options, std::vector<Tensor> l2_weights = {});
  // x and y already on the model's device; adds the batch's loss and accuracy to totals (with
  // defer_totals: its sample counts now, its loss and correct count at the next flush_totals()).
  void operator()(const Tensor& x, const Tensor& y, EpochTotals& totals);
  // Adds the deferred sums to totals (one wait for the device); a no-op without defer_totals.
  void flush_totals(EpochTotals& totals);
  // With cuda_graph: the steps replayed from a graph so far, and how many graphs were captured.
  int64_t replayed_steps() const { return replayed_; }
  int64_t captures() const { return captures_; }

 private:
  void run(const Tensor& x, const Tensor& y, EpochTotals& totals);
  void run_graphed(const Tensor& x, const Tensor& y, EpochTotals& totals);
  // The micro-batch's loss and correct count into totals, or into the deferred sums.
  void add_to_totals(const Tensor& logits, const Tensor& y, const Tensor& loss, EpochTotals& totals);

  nn::Module& model_;
  DataParallel& dp_;
  optim::Optimizer& opt_;
  amp::GradScaler& scaler_;
  optim::LRScheduler* schedule_;
  LossFn loss_;
  StepOptions o_;
  std::vector<Tensor> l2_weights_;
  std::vector<Tensor> params_;  // what --clip measures
  // defer_totals: f32 sums on the device since the last flush. Counts stay exact in f32 up to
  // 2^24; a flush comes before the samples since the last one pass kMaxDeferredSamples.
  // They are added to in place, so that a graph's replays add to the same memory.
  Tensor loss_sum_, correct_;
  int64_t deferred_samples_ = 0;
  static constexpr int64_t kMaxDeferredSamples = int64_t(1) << 22;
  // cuda_graph: the captured step, its input buffers, what one step adds to the host's counts,
  // and the eager steps still to run before capturing (cuDNN's search, the optimizer's state).
  std::unique_ptr<cuda::Graph> graph_;
  Tensor graph_x_, graph_y_;
  EpochTotals graph_counts_;
  int64_t warmup_left_ = 2, replayed_ = 0, captures_ = 0;
};

}  // namespace mdl::train
