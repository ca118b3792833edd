// L2 regularisation as a loss term, for the layers one chooses (e.g. dense layers only):
// l2_penalty(params, lambda) = lambda / 2 * sum_p ||p||^2, whose gradient lambda * p is exactly
// what SGD's weight_decay = lambda adds to the gradient.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace mdl::optim {

// A 0-dim differentiable tensor (f32 unless the first parameter is f64).
Tensor l2_penalty(const std::vector<Tensor>& params, double lambda);

}  // namespace mdl::optim
