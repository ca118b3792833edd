// cross_entropy_loss through flatten_for_loss; the classification test by shape and dtype.
#include "train/loss_fn.h"

#include "nn/functional.h"
#include "train/flatten_logits.h"

namespace mdl::train {

Tensor cross_entropy_loss(const Tensor& logits, const Tensor& targets) {
  auto [l, t] = flatten_for_loss(logits, targets);
  return nn::functional::cross_entropy(l, t);
}

bool is_classification(const Tensor& logits, const Tensor& targets) {
  return !is_floating(targets.dtype()) && (logits.dim() == 2 || logits.dim() == 3) && targets.dim() == logits.dim() - 1;
}

int64_t loss_rows(const Tensor& logits, const Tensor& targets) {
  if (is_classification(logits, targets)) return targets.numel();
  return targets.dim() > 0 ? targets.size(0) : 1;
}

}  // namespace mdl::train
