// One loss and one set of metrics for both kinds of model: a classifier's logits (B, C) with
// targets (B) pass as they are; a language model's logits (B, T, V) with targets (B, T) become
// B*T rows of a V-way classification.
#pragma once
#include <utility>

#include "tensor/tensor.h"

namespace mdl::train {

// (logits, targets) as (N, C) and (N).
std::pair<Tensor, Tensor> flatten_for_loss(const Tensor& logits, const Tensor& targets);

}  // namespace mdl::train
