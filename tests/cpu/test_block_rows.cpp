// The row-by-row block copies and sums of cpu/block_rows.h against plain loops, bit for bit: on
// AVX-512 (called directly) and through the dispatcher, for row widths around one and two vectors
// (0 to 70 values), strides wider than the rows, and the values next to each block left untouched;
// the copy of every other value; the source ending at the last value read; and the fold of a plane against the padded-buffer loop it replaced, over
// kernel sizes, paddings, strides 1 and 2 and planes past one vector, with values whose sums round.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "cpu/block_rows.h"
#include "cpu/cpu_features.h"

using namespace mdl;

namespace {

constexpr int64_t kRows = 5, kGap = 7;  // each row kGap past its width: stride n + kGap

template <class T>
std::vector<T> pattern(int64_t n, uint32_t seed) {
  std::vector<T> v(static_cast<size_t>(n));
  uint32_t s = seed;
  for (T& x : v) {
    s = s * 1664525u + 1013904223u;
    if constexpr (std::is_same_v<T, float>) x = float(int32_t(s >> 8) % 2001 - 1000) / 64.0f;
    else x = T(s >> 16);
  }
  return v;
}

// Runs `copy` (dst, dst_stride, src, src_stride, rows, n) and `reference` on the same blocks, the
// source's rows `step` * n wide (then the gap).
template <class T, class F, class R>
void check_against_loops(F copy, R reference, int64_t step = 1) {
  for (int64_t n = 0; n <= 70; ++n) {
    CAPTURE(n);
    const int64_t ds = n + kGap, ss = step * n + 2 * kGap + 1;
    // the last row ends at the last value read
    const std::vector<T> src = pattern<T>((kRows - 1) * ss + (n > 0 ? step * (n - 1) + 1 : 0), 7 + uint32_t(n));
    std::vector<T> got = pattern<T>(kRows * ds, 99), want = got;
    copy(got.data(), ds, src.data(), ss, kRows, n);
    reference(want.data(), ds, src.data(), ss, kRows, n);
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0);
  }
}

void copy_loops(uint16_t* d, int64_t ds, const uint16_t* s, int64_t ss, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) d[r * ds + j] = s[r * ss + j];
}
void copy_even_loops(uint16_t* d, int64_t ds, const uint16_t* s, int64_t ss, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) d[r * ds + j] = s[r * ss + 2 * j];
}
void add_loops(float* d, int64_t ds, const float* s, int64_t ss, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) d[r * ds + j] += s[r * ss + j];
}

// The fold as the padded-buffer loop did it: each tap's plane added, in tap order, into a zeroed
// ((Ho - 1) * sh + kh) x ((Wo - 1) * sw + kw) buffer at (ki, kj), rows sh and columns sw apart, then
// the buffer's interior added to dx.
void fold_loops(float* dx, int64_t H, int64_t W, const float* taps, int64_t tap_stride, int64_t kh, int64_t kw,
                int64_t Ho, int64_t Wo, int64_t pad_h, int64_t pad_w, int64_t sh, int64_t sw) {
  const int64_t Hp = (Ho - 1) * sh + kh, Wp = (Wo - 1) * sw + kw;
  std::vector<float> pp(static_cast<size_t>(Hp * Wp), 0.0f);
  for (int64_t ki = 0; ki < kh; ++ki)
    for (int64_t kj = 0; kj < kw; ++kj)
      for (int64_t r = 0; r < Ho; ++r)
        for (int64_t j = 0; j < Wo; ++j)
          pp[size_t((r * sh + ki) * Wp + j * sw + kj)] += taps[(ki * kw + kj) * tap_stride + r * Wo + j];
  for (int64_t ih = 0; ih < H && ih + pad_h < Hp; ++ih)
    for (int64_t iw = 0; iw < W && iw + pad_w < Wp; ++iw) dx[ih * W + iw] += pp[size_t((ih + pad_h) * Wp + iw + pad_w)];
}

const std::pair<int64_t, int64_t> kPlaneSizes[] = {{1, 1},  {4, 4},  {8, 8},  {7, 15}, {5, 16},
                                                   {3, 17}, {2, 40}, {9, 33}, {6, 64}};

template <class F>
void check_fold(F fold) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-12, 12);
  for (int64_t stride : {1, 2})
    for (int64_t k : {1, 2, 3, 5})
      for (int64_t pad : {0, 1, 2, 3})
        for (const auto& size : kPlaneSizes) {
          const int64_t H = size.first, W = size.second;
          const int64_t Ho = (H + 2 * pad - k) / stride + 1, Wo = (W + 2 * pad - k) / stride + 1;
          if (H + 2 * pad < k) continue;
          CAPTURE(stride);
          CAPTURE(k);
          CAPTURE(pad);
          CAPTURE(H);
          CAPTURE(W);
          const int64_t tap_stride = Ho * Wo + 3;
          std::vector<float> taps(static_cast<size_t>(k * k * tap_stride)), got(static_cast<size_t>(H * W));
          for (float& t : taps) t = std::ldexp(u(rng), scale(rng));  // magnitudes apart: the order of the sums shows
          for (float& d : got) d = std::ldexp(u(rng), scale(rng));
          std::vector<float> want = got;
          if (stride == 1) fold(got.data(), H, W, taps.data(), tap_stride, k, k, Ho, Wo, pad, pad, 1, 1);
          else fold(got.data(), H, W, taps.data(), tap_stride, k, k, Ho, Wo, pad, pad, stride, stride);
          fold_loops(want.data(), H, W, taps.data(), tap_stride, k, k, Ho, Wo, pad, pad, stride, stride);
          CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
        }
  // one stride per dim
  const int64_t H = 9, W = 21, k = 3, pad = 1, Ho = (H + 2 * pad - k) / 2 + 1, Wo = W + 2 * pad - k + 1;
  for (auto [sh, sw] : {std::pair<int64_t, int64_t>{2, 1}, {1, 2}}) {
    const int64_t ho = sh == 2 ? Ho : H + 2 * pad - k + 1, wo = sw == 2 ? (W + 2 * pad - k) / 2 + 1 : Wo;
    std::vector<float> taps(static_cast<size_t>(k * k * ho * wo)), got(static_cast<size_t>(H * W));
    for (float& t : taps) t = std::ldexp(u(rng), scale(rng));
    std::vector<float> want = got;
    fold(got.data(), H, W, taps.data(), ho * wo, k, k, ho, wo, pad, pad, sh, sw);
    fold_loops(want.data(), H, W, taps.data(), ho * wo, k, k, ho, wo, pad, pad, sh, sw);
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("block rows: a plane's fold matches the padded-buffer loop, bit for bit") { check_fold(cpu::fold_plane_f32); }

TEST_CASE("block rows: the AVX-512 fold matches the padded-buffer loop" * doctest::skip(!cpu::has_avx512f())) {
  check_fold(cpu::detail::fold_plane_f32_avx512);
}

TEST_CASE("block rows: 16-bit copies match the loops, the gaps between rows untouched") {
  check_against_loops<uint16_t>(cpu::copy_block_u16, copy_loops);
}

TEST_CASE("block rows: the AVX-512BW copy matches the loops" * doctest::skip(!cpu::has_avx512bw())) {
  check_against_loops<uint16_t>(cpu::detail::copy_block_u16_avx512, copy_loops);
}

TEST_CASE("block rows: copies of every other 16-bit value match the loops") {
  check_against_loops<uint16_t>(cpu::copy_block_u16_even, copy_even_loops, 2);
}

TEST_CASE("block rows: the AVX-512BW copy of every other value matches the loops" *
          doctest::skip(!cpu::has_avx512bw())) {
  check_against_loops<uint16_t>(cpu::detail::copy_block_u16_even_avx512, copy_even_loops, 2);
}

TEST_CASE("block rows: f32 sums match the loops, the gaps between rows untouched") {
  check_against_loops<float>(cpu::add_block_f32, add_loops);
}

TEST_CASE("block rows: the AVX-512 sum matches the loops" * doctest::skip(!cpu::has_avx512f())) {
  check_against_loops<float>(cpu::detail::add_block_f32_avx512, add_loops);
}
