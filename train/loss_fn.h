// The loss a training loop minimises, as a function of the model's output and the batch's
// targets, and the test that says whether a batch is a classification (so accuracy means
// something): logits (N, C) with integer targets (N), or (B, T, V) with (B, T).
#pragma once
#include <functional>

#include "tensor/tensor.h"

namespace mdl::train {

// (logits, targets) -> a 0-dim loss, the mean over the batch.
using LossFn = std::function<Tensor(const Tensor& logits, const Tensor& targets)>;

// Cross-entropy over classes; a language model's (B, T, V) logits count as B*T rows.
Tensor cross_entropy_loss(const Tensor& logits, const Tensor& targets);

bool is_classification(const Tensor& logits, const Tensor& targets);
// How many samples (or tokens) the batch's loss is a mean over: the rows of a classification,
// else the batch size.
int64_t loss_rows(const Tensor& logits, const Tensor& targets);

}  // namespace mdl::train
