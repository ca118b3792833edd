// TrainStep: gradient accumulation, mixed precision and clipping around one optimizer step,
// with the forward, backward and optimizer phases marked for the profiler.
#include "train/train_step.h"

#include <algorithm>
#include <cmath>

#include "ops/autocast.h"
#include "ops/ops.h"
#include "optim/clip.h"
#include "optim/regularization.h"
#include "profiler/scope.h"
#include "tensor/grad_mode.h"
#include "train/flatten_logits.h"
#include "train/setup.h"

namespace mdl::train {
namespace {

// How many rows of logits pick their target, as a tensor on their device.
Tensor correct_count(const Tensor& logits, const Tensor& y) {
  NoGradGuard no_grad;
  return sum(eq(argmax(logits.detach(), 1), y));
}

Tensor accumulate(const Tensor& sum, const Tensor& value) { return sum.defined() ? sum + value : value; }

}  // namespace

TrainStep::TrainStep(nn::Module& model, DataParallel& dp, optim::Optimizer& opt, amp::GradScaler& scaler,
                     optim::LRScheduler* schedule, LossFn loss, StepOptions options, std::vector<Tensor> l2_weights)
    : model_(model), dp_(dp), opt_(opt), scaler_(scaler), schedule_(schedule), loss_(std::move(loss)), o_(options),
      l2_weights_(o_.l2 > 0 ? std::move(l2_weights) : std::vector<Tensor>{}), params_(model.parameters()) {
  MDL_CHECK(loss_, "TrainStep: no loss function");
  MDL_CHECK(o_.grad_accum >= 1, "TrainStep: grad_accum must be at least 1, got ", o_.grad_accum);
  MDL_CHECK(o_.clip >= 0 && o_.l2 >= 0, "TrainStep: clip and l2 must not be negative, got ", o_.clip, " and ", o_.l2);
}

TrainStep::TrainStep(const TrainOptions& o, nn::Module& model, DataParallel& dp, optim::Optimizer& opt,
                     amp::GradScaler& scaler, optim::LRScheduler* schedule, bool autocast, DType amp_dtype)
    : TrainStep(model, dp, opt, scaler, schedule, cross_entropy_loss,
                {.grad_accum = o.grad_accum,
                 .clip = o.clip,
                 .l2 = o.l2,
                 .autocast = autocast,
                 .amp_dtype = amp_dtype,
                 .defer_totals = parse_device(o.device).is_cuda()},
                o.l2 > 0 ? dense_weights(model) : std::vector<Tensor>{}) {}

void TrainStep::operator()(const Tensor& x, const Tensor& y, EpochTotals& totals) {
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
      amp::AutocastGuard guard(o_.amp_dtype, o_.autocast);
      logits = dp_.forward(model_, xi);
      loss = loss_(logits, yi);
      MDL_CHECK(loss.numel() == 1, "TrainStep: the loss function returned ", shape_str(loss.shape()),
                "; expected a single value (the batch's mean loss)");
      if (!l2_weights_.empty()) loss = loss + optim::l2_penalty(l2_weights_, o_.l2);
      const int64_t rows = loss_rows(logits, yi);
      if (is_classification(logits, yi)) {
        auto [l, t] = flatten_for_loss(logits, yi);
        const Tensor correct = correct_count(l, t);
        if (o_.defer_totals) correct_ = accumulate(correct_, correct.to(kF32));
        else totals.correct += correct.to(kI64).item<int64_t>();
        totals.classified += rows;
      }
      totals.seen += rows;
      if (o_.defer_totals) {
        NoGradGuard no_grad;
        loss_sum_ = accumulate(loss_sum_, loss.detach().to(kF32) * double(rows));
        deferred_samples_ += rows;
      } else {
        totals.loss_sum += loss.item<double>() * double(rows);
      }
    }
    profiler::Phase phase(profiler::kBackward);
    dp_.backward(scaler_.scale(loss * (double(b - a) / double(n))), i + 1 == k);
  }
  profiler::Phase phase(profiler::kOptimizer);
  if (o_.clip > 0) {
    scaler_.unscale_(opt_);
    optim::clip_grad_norm_(params_, o_.clip);
  }
  const bool stepped = scaler_.step(opt_);
  scaler_.update();
  if (schedule_ && stepped) schedule_->step();
  if (deferred_samples_ >= kMaxDeferredSamples) flush_totals(totals);
}

void TrainStep::flush_totals(EpochTotals& totals) {
  if (loss_sum_.defined()) totals.loss_sum += loss_sum_.item<double>();
  if (correct_.defined()) totals.correct += std::llround(correct_.item<double>());
  loss_sum_ = Tensor(), correct_ = Tensor();
  deferred_samples_ = 0;
}

}  // namespace mdl::train
