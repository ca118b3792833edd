// validate: loss summed per sample (so the mean is over samples, not batches) and a confusion
// matrix accumulated batch by batch.
#include "train/validate.h"

#include <memory>

#include "tensor/grad_mode.h"
#include "train/flatten_logits.h"
#include "train/metrics.h"

namespace mdl::train {

Validation validate(nn::Module& model, data::DataLoader& loader, Device device, const amp::AmpConfig& amp,
                    int64_t classes, const std::vector<std::string>& names, const LossFn& loss) {
  nn::TrainingModeGuard restore(model);  // a model the caller had in eval mode stays so
  model.eval();
  NoGradGuard no_grad;
  std::unique_ptr<ConfusionMatrix> cm;  // made at the first classification batch
  double loss_sum = 0;
  int64_t n = 0;
  for (auto& [xb, yb] : loader) {
    Tensor x = xb.to(device), y = yb.to(device);
    Tensor logits;
    {
      amp::AutocastGuard autocast = amp.guard();
      logits = model(x);
    }
    logits = logits.to(kF32);
    const int64_t rows = loss_rows(logits, y);
    loss_sum += loss(logits, y).item<double>() * double(rows);
    n += rows;
    if (is_classification(logits, y)) {
      auto [l, t] = flatten_for_loss(logits, y);
      if (!cm) cm = std::make_unique<ConfusionMatrix>(classes > 0 ? classes : l.size(1));
      cm->add(l, t);
    }
  }
  if (n == 0) return {};
  if (!cm) return {loss_sum / double(n), NAN, NAN, ""};
  return {loss_sum / double(n), cm->accuracy(), cm->macro_f1(), cm->str(names)};
}

}  // namespace mdl::train
