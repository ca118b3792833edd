// What the CUDA attention tests share: a normwise relative error of a result against its reference.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "mdl.h"

namespace mdl::test {

// max |got - want| / max |want| over all elements (max |got - want| where want is all zero); an
// infinity must meet the same infinity.
inline double rel_err(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  const Tensor g = got.to(Device::cpu()).to(kF64).contiguous(), w = want.to(Device::cpu()).to(kF64).contiguous();
  double err = 0, mag = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = g.data_ptr<double>()[i], b = w.data_ptr<double>()[i];
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) return INFINITY;
      continue;
    }
    err = std::max(err, std::abs(a - b));
    mag = std::max(mag, std::abs(b));
  }
  return err / (mag > 0 ? mag : 1.0);
}

}  // namespace mdl::test
