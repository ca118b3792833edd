// The row-by-row block copies and sums of cpu/block_rows.h against plain loops, bit for bit: on
// AVX-512 (called directly) and through the dispatcher, for row widths around one and two vectors
// (0 to 70 values), strides wider than the rows, and the values next to each block left untouched.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
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

// Runs `copy` (dst, dst_stride, src, src_stride, rows, n) and `reference` on the same blocks.
template <class T, class F, class R>
void check_against_loops(F copy, R reference) {
  for (int64_t n = 0; n <= 70; ++n) {
    CAPTURE(n);
    const int64_t ds = n + kGap, ss = n + 2 * kGap + 1;
    const std::vector<T> src = pattern<T>(kRows * ss, 7 + uint32_t(n));
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
void add_loops(float* d, int64_t ds, const float* s, int64_t ss, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) d[r * ds + j] += s[r * ss + j];
}

}  // namespace

TEST_CASE("block rows: 16-bit copies match the loops, the gaps between rows untouched") {
  check_against_loops<uint16_t>(cpu::copy_block_u16, copy_loops);
}

TEST_CASE("block rows: the AVX-512BW copy matches the loops" * doctest::skip(!cpu::has_avx512bw())) {
  check_against_loops<uint16_t>(cpu::detail::copy_block_u16_avx512, copy_loops);
}

TEST_CASE("block rows: f32 sums match the loops, the gaps between rows untouched") {
  check_against_loops<float>(cpu::add_block_f32, add_loops);
}

TEST_CASE("block rows: the AVX-512 sum matches the loops" * doctest::skip(!cpu::has_avx512f())) {
  check_against_loops<float>(cpu::detail::add_block_f32_avx512, add_loops);
}
