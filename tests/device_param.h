// Devices for the op tests: the CPU always, CUDA when a GPU is present; the decorator that marks a
// CUDA-only test case skipped (reported skipped, not passed) without one; and a CPU-vs-device
// comparison with each dtype's tolerance.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mdl.h"
#include "cuda/api.h"

namespace mdl::test {

inline std::vector<Device> test_devices() {
  std::vector<Device> d{Device::cpu()};
  if (cuda::is_available()) d.push_back(Device::cuda());
  return d;
}

// Evaluated at registration (static init): cuda::is_available() only asks the runtime for a count.
#define MDL_CUDA_ONLY doctest::skip(!::mdl::cuda::is_available())

inline double tolerance(DType t) {
  switch (t) {
    case kF64: return 1e-10;
    case kF32: return 2e-5;
    case kF16: return 2e-3;
    case kBF16: return 1.6e-2;
    default: return 0.0;
  }
}

// Every element of `got` (any device) within tol * (1 + |want|) of `want`; NaN matches NaN.
inline void check_close(const Tensor& want, const Tensor& got, const std::string& what, double tol = -1) {
  REQUIRE_MESSAGE(want.shape() == got.shape(), what, ": shapes ", shape_str(want.shape()), " and ", shape_str(got.shape()));
  if (tol < 0) tol = tolerance(want.dtype());
  const std::vector<double> a = want.to_vector<double>(), b = got.to_vector<double>();
  size_t bad = 0, worst = 0;
  double worst_err = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;  // equal infinities
    const double err = std::abs(a[i] - b[i]) / (1.0 + std::abs(a[i]));
    if (!(err <= tol)) {
      ++bad;
      if (!(err <= worst_err)) worst_err = err, worst = i;
    }
  }
  CHECK_MESSAGE(bad == 0, what, ": ", bad, " of ", a.size(), " elements differ; worst at ", worst, ": want ",
                a.empty() ? 0.0 : a[worst], ", got ", b.empty() ? 0.0 : b[worst], " (tol ", tol, ")");
}

// A seeded normal sample drawn in f64, then cast to t: the same values for every dtype and device.
inline Tensor sample(const Shape& s, DType t, uint64_t seed) {
  Generator g(seed);
  return randn(s, TensorOptions(kF64), &g).to(t);
}

}  // namespace mdl::test
