// flatten_for_loss: a reshape for the sequence case, nothing otherwise.
#include "train/flatten_logits.h"

namespace mdl::train {

std::pair<Tensor, Tensor> flatten_for_loss(const Tensor& logits, const Tensor& targets) {
  if (logits.dim() == 3) return {logits.reshape({-1, logits.size(2)}), targets.reshape({-1})};
  return {logits, targets};
}

}  // namespace mdl::train
