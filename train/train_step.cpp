// TrainStep: gradient accumulation, mixed precision and clipping around one optimizer step,
// with the forward, backward and optimizer phases marked for the profiler.
#include "train/train_step.h"

#include <algorithm>

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

int64_t count_correct(const Tensor& logits, const Tensor& y) {
  NoGradGuard no_grad;
  return sum(eq(argmax(logits.detach(), 1), y)).to(kI64).item<int64_t>();
}

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
                {.grad_accum = o.grad_accum, .clip = o.clip, .l2 = o.l2, .autocast = autocast, .amp_dtype = amp_dtype},
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
        totals.correct += count_correct(l, t);
        totals.classified += rows;
      }
      totals.seen += rows;
      totals.loss_sum += loss.item<double>() * double(rows);
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
}

}  // namespace mdl::train
