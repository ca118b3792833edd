// What the CPU emulations of a warp's tensor-core instructions share (tests/kernels/
// test_mma_fragments*.cpp): a shared-memory tile of small integers (products and sums stay exact in
// f32), the accumulators of a 16 x 8 product per lane, and the checks that a layout covers its matrix
// once and that accumulators hold a wanted matrix.
#pragma once
#include <array>
#include <functional>
#include <random>
#include <vector>

#include "kernels/mma_fragments.h"

namespace mdl::test::warp {

constexpr int kLanes = 32;

// A (rows, cols) tile in shared memory whose rows lie cols + pad elements apart, as a kernel lays
// out q, k and v.
struct Tile {
  int rows, cols, pitch;
  std::vector<float> x;
  Tile(int r, int c, int pad, unsigned seed) : rows(r), cols(c), pitch(c + pad), x(size_t(r * (c + pad)), 0.0f) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> small(-3, 3);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) at(i, j) = float(small(gen));
  }
  float& at(int i, int j) { return x[size_t(i * pitch + j)]; }
  float at(int i, int j) const { return x[size_t(i * pitch + j)]; }
};

// Per lane: the four f32 elements of a 16 x 8 accumulator (mma::c_element's layout, which m16n8k16
// and m16n8k8 share).
using Accumulator = std::array<std::array<float, 4>, kLanes>;

// Whether the warp's accumulators hold want (16 x n_tiles*8), element (row, col) at n-tile col / 8.
inline bool holds(const std::vector<Accumulator>& acc, const std::function<float(int, int)>& want) {
  for (size_t n = 0; n < acc.size(); ++n)
    for (int l = 0; l < kLanes; ++l)
      for (int i = 0; i < 4; ++i) {
        const mma::RowCol e = mma::c_element(l, i);
        if (acc[n][size_t(l)][size_t(i)] != want(e.row, int(n) * 8 + e.col)) return false;
      }
  return true;
}

// Every element of a (rows x cols) matrix held by exactly one (lane, i < per_lane).
inline bool covers_once(int rows, int cols, int per_lane, const std::function<mma::RowCol(int, int)>& layout) {
  std::vector<int> seen(size_t(rows * cols), 0);
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < per_lane; ++i) {
      const mma::RowCol e = layout(l, i);
      if (e.row < 0 || e.row >= rows || e.col < 0 || e.col >= cols) return false;
      ++seen[size_t(e.row * cols + e.col)];
    }
  for (int n : seen)
    if (n != 1) return false;
  return true;
}

}  // namespace mdl::test::warp
