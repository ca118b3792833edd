// flush_denormal (tensor/float_mode.h): on by default; on, a product below f32's smallest normal
// comes out as zero on every thread that computes it (elementwise ops and the GEMM), off, it is
// the denormal; flipping it takes effect on the worker threads too.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/gemm.h"
#include "mdl.h"
#include "tensor/float_mode.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {

// How many of v are denormal (nonzero, below the smallest normal f32) and how many are zero.
std::pair<int64_t, int64_t> denormals_and_zeros(const std::vector<float>& v) {
  int64_t d = 0, z = 0;
  for (float x : v) {
    if (x == 0.0f) ++z;
    else if (std::fpclassify(x) == FP_SUBNORMAL) ++d;
  }
  return {d, z};
}

}  // namespace

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("flush_denormal: on by default; products below 2^-126 become zero on every thread, or stay denormal") {
  CHECK(toggles::flush_denormal());
  const int64_t n = 1 << 20;                          // past the grain, so every thread computes a share
  Tensor a = full({n}, 1e-20), b = full({n}, 1e-20);  // each product 1e-40: a denormal f32
  for (bool on : {false, true, false, true}) {
    toggles::set_flush_denormal(on);
    const auto [d, z] = denormals_and_zeros((a * b).to_vector<float>());
    CAPTURE(on);
    CHECK(d == (on ? 0 : n));
    CHECK(z == (on ? n : 0));
  }
  // The GEMM, threaded: C (64 x 64) = A (64 x 256) @ B with every product about 1e-41.
  const int64_t m = 64, k = 256;
  std::vector<float> A(m * k, 1e-21f), B(k * m, 1e-20f), C(m * m);
  for (bool on : {false, true}) {
    toggles::set_flush_denormal(on);
    cpu::gemm_f32(m, m, k, 1.0f, A.data(), k, 1, B.data(), m, 1, 0.0f, C.data(), m, 1);
    const auto [d, z] = denormals_and_zeros(C);
    CAPTURE(on);
    CHECK(d == (on ? 0 : m * m));
  }
  toggles::set_flush_denormal(true);
}
#endif
