// Comparing tensors in tests: the largest absolute difference relative to the reference's scale.
#pragma once
#include <algorithm>
#include <cmath>

#include "tensor/tensor.h"

namespace mdl::test {

// max |a - b| / max |b|, in f64 (0 when both are zero).
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to(kF64).to_vector<double>(), y = b.to(kF64).to_vector<double>();
  double scale = 0, diff = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    diff = std::max(diff, std::abs(x[i] - y[i]));
  }
  return diff / std::max(scale, 1e-300);
}

}  // namespace mdl::test
