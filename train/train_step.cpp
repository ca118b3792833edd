// TrainStep: gradient accumulation, mixed precision and clipping around one optimizer step,
// with the forward, backward and optimizer phases marked for the profiler.
#include "train/train_step.h"

#include <algorithm>
#include <cmath>

#include "ops/autocast.h"
#include "ops/ops.h"
#include "cuda/api.h"
#include "optim/clip.h"
#include "optim/regularization.h"
#include "profiler/scope.h"
#include "tensor/grad_mode.h"
#include "train/flatten_logits.h"

namespace mdl::train {
namespace {

// How many rows of logits pick their target, as a tensor on their device.
Tensor correct_count(const Tensor& logits, const Tensor& y) {
  NoGradGuard no_grad;
  return sum(eq(argmax(logits.detach(), 1), y));
}

// sum += value in place (a graph's replays add to the memory it captured); sum is created at the
// first call.
void accumulate(Tensor& sum, const Tensor& value) {
  if (!sum.defined()) sum = zeros({}, TensorOptions(kF32, value.device()));
  sum.add_(value);
}

}  // namespace

TrainStep::TrainStep(nn::Module& model, DataParallel& dp, optim::Optimizer& opt, amp::GradScaler& scaler,
                     optim::LRScheduler* schedule, LossFn loss, StepOptions options, std::vector<Tensor> l2_weights)
    : model_(model), dp_(dp), opt_(opt), scaler_(scaler), schedule_(schedule), loss_(std::move(loss)), o_(options),
      l2_weights_(o_.l2 > 0 ? std::move(l2_weights) : std::vector<Tensor>{}), params_(model.parameters()) {
  MDL_CHECK(loss_, "TrainStep: no loss function");
  MDL_CHECK(o_.grad_accum >= 1, "TrainStep: grad_accum must be at least 1, got ", o_.grad_accum);
  MDL_CHECK(o_.clip >= 0 && o_.l2 >= 0, "TrainStep: clip and l2 must not be negative, got ", o_.clip, " and ", o_.l2);
  MDL_CHECK(!o_.cuda_graph || o_.defer_totals, "TrainStep: cuda_graph needs defer_totals (a replay cannot read the ",
            "loss back to the host)");
}

void TrainStep::operator()(const Tensor& x, const Tensor& y, EpochTotals& totals) {
  if (o_.cuda_graph) run_graphed(x, y, totals);
  else run(x, y, totals);
  if (deferred_samples_ >= kMaxDeferredSamples) flush_totals(totals);
}

void TrainStep::run_graphed(const Tensor& x, const Tensor& y, EpochTotals& totals) {
  const bool fits = graph_ && x.shape() == graph_x_.shape() && y.shape() == graph_y_.shape() &&
                    x.dtype() == graph_x_.dtype() && y.dtype() == graph_y_.dtype();
  if (!fits && (warmup_left_ > 0 || graph_)) {  // warm-up, or a batch of other shapes
    if (warmup_left_ > 0) --warmup_left_;
    return run(x, y, totals);
  }
  if (!fits) {  // the capture: its kernels are recorded, not run; the replay below runs them
    graph_x_ = x.clone(), graph_y_ = y.clone();
    // The sums exist before the capture: one created inside it would be zeroed by every replay.
    for (Tensor* sum : {&loss_sum_, &correct_})
      if (!sum->defined()) *sum = zeros({}, TensorOptions(kF32, x.device()));
    const EpochTotals before = totals;
    const int64_t deferred_before = deferred_samples_;
    opt_.sync_device_lr();  // so that the capture records no write of the lr
    cuda::synchronize();
    graph_ = std::make_unique<cuda::Graph>();
    try {
      graph_->capture_begin();
      run(graph_x_, graph_y_, totals);
      graph_->capture_end();
    } catch (...) {
      graph_.reset();  // ends the abandoned capture
      totals = before;
      throw;
    }
    ++captures_;
    graph_counts_ = {.seen = totals.seen - before.seen, .classified = totals.classified - before.classified};
    totals = before;
    deferred_samples_ = deferred_before;
  } else {
    graph_x_.copy_(x), graph_y_.copy_(y);
    opt_.sync_device_lr();  // an lr set since the last step (the schedule, --plateau)
  }
  graph_->replay();
  ++replayed_;
  totals.seen += graph_counts_.seen, totals.classified += graph_counts_.classified;
  deferred_samples_ += graph_counts_.seen;
  if (schedule_) schedule_->step();
}

void TrainStep::run(const Tensor& x, const Tensor& y, EpochTotals& totals) {
  const int64_t n = x.size(0), k = std::min(o_.grad_accum, n);
  opt_.zero_grad();
  for (int64_t i = 0; i < k; ++i) {
    // Micro-batch i; each loss weighted by its share of the batch, so the summed gradient
    // is the gradient of the whole batch's mean loss.
    const int64_t a = i * n / k, b = (i + 1) * n / k;
    const Tensor xi = x.narrow(0, a, b - a), yi = y.narrow(0, a, b - a);
    Tensor logits, loss;
    {
      profiler::Phase phase(profiler::kForward);
      amp::AutocastGuard autocast = o_.amp.guard();
      dp_.before_forward();
      logits = model_(xi);
      loss = loss_(logits, yi);
      MDL_CHECK(loss.numel() == 1, "TrainStep: the loss function returned ", shape_str(loss.shape()),
                "; expected a single value (the batch's mean loss)");
      if (!l2_weights_.empty()) loss = loss + optim::l2_penalty(l2_weights_, o_.l2);
      add_to_totals(logits, yi, loss, totals);
    }
    profiler::Phase phase(profiler::kBackward);
    dp_.sync_gradients(i + 1 == k);
    scaler_.scale(loss * (double(b - a) / double(n))).backward();
  }
  dp_.wait_gradients();
  profiler::Phase phase(profiler::kOptimizer);
  if (o_.clip > 0) {
    scaler_.unscale_(opt_);
    if (o_.defer_totals) optim::clip_grad_norm_on_device_(params_, o_.clip);  // no wait for the GPU
    else optim::clip_grad_norm_(params_, o_.clip);
  }
  const amp::StepResult stepped = scaler_.step(opt_);
  scaler_.update();
  // Reading `stepped` would wait for the GPU: with deferred totals the schedule advances on every
  // optimizer step, skipped or not, as PyTorch's training loops do.
  if (schedule_ && !cuda::is_capturing() && (o_.defer_totals || stepped)) schedule_->step();
}

void TrainStep::add_to_totals(const Tensor& logits, const Tensor& y, const Tensor& loss, EpochTotals& totals) {
  const int64_t rows = loss_rows(logits, y);
  if (is_classification(logits, y)) {
    auto [l, t] = flatten_for_loss(logits, y);
    const Tensor correct = correct_count(l, t);
    if (o_.defer_totals) accumulate(correct_, correct.to(kF32));
    else totals.correct += correct.to(kI64).item<int64_t>();
    totals.classified += rows;
  }
  totals.seen += rows;
  if (o_.defer_totals) {
    NoGradGuard no_grad;
    accumulate(loss_sum_, loss.detach().to(kF32) * double(rows));
    deferred_samples_ += rows;
  } else {
    totals.loss_sum += loss.item<double>() * double(rows);
  }
}

void TrainStep::flush_totals(EpochTotals& totals) {
  if (loss_sum_.defined()) {
    totals.loss_sum += loss_sum_.item<double>();
    loss_sum_.zero_();
  }
  if (correct_.defined()) {
    totals.correct += std::llround(correct_.item<double>());
    correct_.zero_();
  }
  deferred_samples_ = 0;
}

}  // namespace mdl::train
