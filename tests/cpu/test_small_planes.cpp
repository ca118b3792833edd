// The unfolding and folding of planes of at most 16 values (cpu/small_planes.h) against plain loops
// and against fold_plane_f32, bit for bit, on AVX-512 (called directly) and through the dispatcher:
// every map of up to 16 values from 1x1 to 4x4 and 2x8, kernels 1 to 3 with padding 0 to 2, strides 1
// and 2, several planes strided apart, and the values between planes left untouched.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/block_rows.h"
#include "cpu/cpu_features.h"
#include "cpu/small_planes.h"

using namespace mdl;
using cpu::SmallPlaneGeom;

namespace {

constexpr int64_t kPlanes = 3, kGap = 5;

// Every geometry with both planes of at most 16 values.
std::vector<SmallPlaneGeom> geometries() {
  std::vector<SmallPlaneGeom> gs;
  const std::pair<int64_t, int64_t> maps[] = {{1, 1}, {2, 3}, {3, 3}, {4, 4}, {3, 5}, {2, 8}};
  for (const auto& hw : maps)
    for (int64_t k : {1, 2, 3})
      for (int64_t pad : {0, 1, 2})
        for (int64_t s : {1, 2}) {
          const int64_t H = hw.first, W = hw.second;
          if (H + 2 * pad < k || W + 2 * pad < k) continue;
          const SmallPlaneGeom g{H, W, k, k, (H + 2 * pad - k) / s + 1, (W + 2 * pad - k) / s + 1, pad, pad, s, s};
          if (cpu::fits_small_planes(g)) gs.push_back(g);
        }
  return gs;
}

std::string describe(const SmallPlaneGeom& g) {
  return std::to_string(g.H) + "x" + std::to_string(g.W) + " kernel " + std::to_string(g.kh) + " pad " +
         std::to_string(g.pad_h) + " stride " + std::to_string(g.stride_h);
}

void unfold_loops(const SmallPlaneGeom& g, const uint16_t* x, int64_t x_stride, int64_t planes, uint16_t* col,
                  int64_t tap_stride, int64_t col_stride) {
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj)
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t ih = oh * g.stride_h + ki - g.pad_h, iw = ow * g.stride_w + kj - g.pad_w;
            col[(ki * g.kw + kj) * tap_stride + p * col_stride + oh * g.Wo + ow] = ih >= 0 && ih < g.H && iw >= 0 &&
                                                                                           iw < g.W
                                                                                       ? x[p * x_stride + ih * g.W + iw]
                                                                                       : uint16_t(0);
          }
}

template <class F>
void check_unfold(F unfold) {
  for (const SmallPlaneGeom& g : geometries()) {
    INFO(describe(g));
    const int64_t x_stride = g.H * g.W + kGap, col_stride = g.Ho * g.Wo + kGap, tap_stride = kPlanes * col_stride + 1;
    std::vector<uint16_t> x(size_t(kPlanes * x_stride));
    for (size_t i = 0; i < x.size(); ++i) x[i] = uint16_t(1000 + 37 * i);
    std::vector<uint16_t> got(size_t(g.kh * g.kw * tap_stride), 0xBEEF), want = got;
    unfold(g, x.data(), x_stride, kPlanes, got.data(), tap_stride, col_stride);
    unfold_loops(g, x.data(), x_stride, kPlanes, want.data(), tap_stride, col_stride);
    CHECK(got == want);
  }
}

template <class F>
void check_fold(F fold) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-12, 12);
  for (const SmallPlaneGeom& g : geometries()) {
    INFO(describe(g));
    const int64_t taps_stride = g.Ho * g.Wo + kGap, tap_stride = kPlanes * taps_stride + 1,
                  dx_stride = g.H * g.W + kGap;
    std::vector<float> taps(size_t(g.kh * g.kw * tap_stride)), got(size_t(kPlanes * dx_stride));
    for (float& t : taps) t = std::ldexp(u(rng), scale(rng));  // magnitudes apart: the order of the sums shows
    for (float& d : got) d = std::ldexp(u(rng), scale(rng));
    std::vector<float> want = got;
    fold(g, taps.data(), tap_stride, taps_stride, kPlanes, got.data(), dx_stride);
    for (int64_t p = 0; p < kPlanes; ++p)
      cpu::fold_plane_f32(want.data() + p * dx_stride, g.H, g.W, taps.data() + p * taps_stride, tap_stride, g.kh, g.kw,
                          g.Ho, g.Wo, g.pad_h, g.pad_w, g.stride_h, g.stride_w);
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("small planes: there are geometries to check") { CHECK(geometries().size() > 40); }

TEST_CASE("small planes: the unfolding matches the loops, the values between planes untouched") {
  check_unfold(cpu::unfold_small_planes_u16);
}

TEST_CASE("small planes: the AVX-512BW unfolding matches the loops" * doctest::skip(!cpu::has_avx512bw())) {
  check_unfold(cpu::detail::unfold_small_planes_u16_avx512);
}

TEST_CASE("small planes: the fold matches fold_plane_f32, bit for bit") { check_fold(cpu::fold_small_planes_f32); }

TEST_CASE("small planes: the AVX-512 fold matches fold_plane_f32" * doctest::skip(!cpu::has_avx512f())) {
  check_fold(cpu::detail::fold_small_planes_f32_avx512);
}
