// l2_penalty composed of public ops, so autograd differentiates it.
#include "optim/regularization.h"

#include "ops/native/factory.h"
#include "ops/ops.h"

namespace mdl::optim {

Tensor l2_penalty(const std::vector<Tensor>& params, double lambda) {
  Tensor total;
  for (const auto& p : params) {
    Tensor s = sum(square(p));
    total = total.defined() ? total + s : s;
  }
  if (!total.defined()) return zeros({}, kF32);
  return total * (lambda / 2);
}

}  // namespace mdl::optim
