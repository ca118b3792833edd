// gradcheck: compares autograd's gradients with central finite differences, in f64.
// Checks the vector-Jacobian product for a fixed random vector r: d/dx sum(fn(x) * r).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::autograd {

struct GradcheckResult {
  bool ok = true;
  std::string report;  // the worst element (input, index, analytic, numeric) on failure
  explicit operator bool() const { return ok; }
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// inputs: contiguous f64 leaves; those with requires_grad are checked.
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);

}  // namespace mdl::autograd
