// TrainStep: gradient accumulation, mixed precision and clipping around one optimizer step,
// with the forward, backward and optimizer phases marked for the profiler.
#include "train/train_step.h"

#include <algorithm>

#include "nn/functional.h"
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

TrainStep::TrainStep(const TrainOptions& o, nn::Module& model, DataParallel& dp, optim::Optimizer& opt,
                     amp::GradScaler& scaler, optim::LRScheduler* schedule, bool autocast, DType amp_dtype)
    : model_(model), dp_(dp), opt_(opt), scaler_(scaler), schedule_(schedule), autocast_(autocast),
      amp_dtype_(amp_dtype), grad_accum_(o.grad_accum), l2_(o.l2), clip_(o.clip),
      l2_weights_(o.l2 > 0 ? dense_weights(model) : std::vector<Tensor>{}), params_(model.parameters()) {}

void TrainStep::operator()(const Tensor& x, const Tensor& y, EpochTotals& totals) {
  const int64_t n = x.size(0), k = std::min(grad_accum_, n);
  opt_.zero_grad();
  for (int64_t i = 0; i < k; ++i) {
    // Micro-batch i; each loss weighted by its share of the batch, so the summed gradient
    // is the gradient of the whole batch's mean loss.
    const int64_t a = i * n / k, b = (i + 1) * n / k;
    const Tensor xi = x.narrow(0, a, b - a), yi = y.narrow(0, a, b - a);
    Tensor logits, loss;
    {
      profiler::Phase phase(profiler::kForward);
      amp::AutocastGuard guard(amp_dtype_, autocast_);
      logits = dp_.forward(model_, xi);
      auto [l, t] = flatten_for_loss(logits, yi);
      loss = nn::functional::cross_entropy(l, t);
      if (!l2_weights_.empty()) loss = loss + optim::l2_penalty(l2_weights_, l2_);
      totals.correct += count_correct(l, t);
      totals.seen += t.size(0);
      totals.loss_sum += loss.item<double>() * double(t.size(0));
    }
    profiler::Phase phase(profiler::kBackward);
    dp_.backward(scaler_.scale(loss * (double(b - a) / double(n))), i + 1 == k);
  }
  profiler::Phase phase(profiler::kOptimizer);
  if (clip_ > 0) {
    scaler_.unscale_(opt_);
    optim::clip_grad_norm_(params_, clip_);
  }
  const bool stepped = scaler_.step(opt_);
  scaler_.update();
  if (schedule_ && stepped) schedule_->step();
}

}  // namespace mdl::train
