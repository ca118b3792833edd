// validate: loss summed per sample (so the mean is over samples, not batches) and a confusion
// matrix accumulated batch by batch.
#include "train/validate.h"

#include "nn/functional.h"
#include "ops/autocast.h"
#include "tensor/grad_mode.h"
#include "train/flatten_logits.h"
#include "train/metrics.h"

namespace mdl::train {

Validation validate(nn::Module& model, data::DataLoader& loader, Device device, bool autocast, DType amp_dtype,
                    int64_t classes, const std::vector<std::string>& names) {
  model.eval();
  NoGradGuard no_grad;
  ConfusionMatrix cm(classes);
  double loss_sum = 0;
  int64_t n = 0;
  for (auto& [xb, yb] : loader) {
    Tensor x = xb.to(device), y = yb.to(device);
    Tensor logits;
    {
      amp::AutocastGuard guard(amp_dtype, autocast);
      logits = model(x);
    }
    auto [l, t] = flatten_for_loss(logits.to(kF32), y);
    loss_sum += nn::functional::cross_entropy(l, t).item<double>() * double(t.size(0));
    n += t.size(0);
    cm.add(l, t);
  }
  model.train();
  if (n == 0) return {};
  return {loss_sum / double(n), cm.accuracy(), cm.macro_f1(), cm.str(names)};
}

}  // namespace mdl::train
