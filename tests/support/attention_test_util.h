// What the CUDA attention tests share: a normwise relative error of a result against its reference,
// bitwise equality of two runs, and the boolean mask they hide keys with.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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

// The same shape, dtype and bytes (read on the CPU).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return x.shape() == y.shape() && x.dtype() == y.dtype() &&
         std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
}

// An (L, S) mask on the CPU that hides a pattern of keys, (7i + 3j) % 5 == 0, and every key of row
// `hidden_row`.
inline Tensor patterned_mask(int64_t L, int64_t S, int64_t hidden_row) {
  Tensor mask = empty({L, S}, kBool);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) mask.data_ptr<bool>()[i * S + j] = i != hidden_row && (i * 7 + j * 3) % 5 != 0;
  return mask;
}

}  // namespace mdl::test
