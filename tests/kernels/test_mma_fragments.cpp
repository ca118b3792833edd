// The tensor-core register layouts of kernels/mma_fragments.h, checked on the CPU: each layout
// gives every element of its matrix to exactly one (lane, element), and a warp emulated with them
// (ldmatrix from a shared-memory tile, mma.sync.m16n8k16) computes the register-tiled
// FlashAttention forward's two products exactly: S = Q K^T from the addresses the kernel hands to
// ldmatrix, and O = P V with P taken straight from S's accumulators. A kernel that swapped two
// matrices of an ldmatrix would fail here; so does the test, shown last.
#include "kernels/mma_fragments.h"

#include <doctest/doctest.h>

#include <array>
#include <functional>
#include <random>
#include <vector>

#include "tests/support/warp_emulation.h"

using namespace mdl::mma;
using namespace mdl::test::warp;

namespace {

// Per lane: four 32-bit registers of two 16-bit elements each.
using Fragment = std::array<std::array<std::array<float, 2>, 4>, kLanes>;

// ldmatrix.sync.aligned.m8n8.x4{.trans}: lane l gives the address (row, col) of row l % 8 of matrix
// l / 8; a matrix row is the 8 elements from its address.
Fragment ldmatrix_x4(Tile& t, const std::function<RowCol(int lane)>& address, bool trans) {
  std::array<std::array<RowCol, 8>, 4> rows{};
  for (int l = 0; l < kLanes; ++l) rows[size_t(ldmatrix_matrix(l))][size_t(ldmatrix_row(l))] = address(l);
  Fragment f{};
  for (int l = 0; l < kLanes; ++l)
    for (int m = 0; m < 4; ++m)
      for (int h = 0; h < 2; ++h) {
        const RowCol e = ldmatrix_element(l, h, trans);
        const RowCol a = rows[size_t(m)][size_t(e.row)];
        f[size_t(l)][size_t(m)][size_t(h)] = t.at(a.row, a.col + e.col);
      }
  return f;
}

// mma.sync.aligned.m16n8k16.row.col.f32: c (16 x 8) += a (16 x 16) b (16 x 8), each operand
// gathered from the lanes by its layout. b's two registers are b_regs[0], b_regs[1] of each lane.
void mma(Accumulator& c, const Fragment& a, const Fragment& b, int b_reg0) {
  float A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < 8; ++i) {
      const RowCol e = a_element(l, i);
      A[e.row][e.col] = a[size_t(l)][size_t(i / 2)][size_t(i % 2)];
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol e = b_element(l, i);
      B[e.row][e.col] = b[size_t(l)][size_t(b_reg0 + i / 2)][size_t(i % 2)];
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol e = c_element(l, i);
      C[e.row][e.col] = c[size_t(l)][size_t(i)];
    }
  }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) C[m][n] += A[m][k] * B[k][n];
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < 4; ++i) {
      const RowCol e = c_element(l, i);
      c[size_t(l)][size_t(i)] = C[e.row][e.col];
    }
}

// The kernel's S = Q K^T for one warp: q (16, D), k (64, D); s[n] the accumulators of keys 8n..8n+7.
std::vector<Accumulator> scores(Tile& q, Tile& k, int D,
                                const std::function<RowCol(int, int, int)>& k_address = k_fragment_address) {
  std::vector<Accumulator> s(8, Accumulator{});
  for (int kk = 0; kk < D / 16; ++kk) {
    const Fragment qf = ldmatrix_x4(
        q, [&](int l) { return q_fragment_address(l, kk); }, false);
    for (int nb = 0; nb < 4; ++nb) {
      const Fragment kf = ldmatrix_x4(
          k, [&](int l) { return k_address(l, nb * 16, kk); }, false);
      mma(s[size_t(2 * nb)], qf, kf, 0);
      mma(s[size_t(2 * nb + 1)], qf, kf, 2);
    }
  }
  return s;
}

}  // namespace

TEST_CASE("mma fragments: each layout holds every element of its matrix exactly once") {
  CHECK(covers_once(16, 16, 8, a_element));
  CHECK(covers_once(16, 8, 4, b_element));
  CHECK(covers_once(16, 8, 4, c_element));
  for (bool trans : {false, true})
    CHECK(covers_once(8, 8, 2, [trans](int l, int h) { return ldmatrix_element(l, h, trans); }));
  // A warp's ldmatrix.x4 addresses for Q: 32 distinct, 16-byte aligned 8-element row segments.
  for (int kk = 0; kk < 4; ++kk) {
    std::vector<int> seen(16 * 8, 0);
    for (int l = 0; l < kLanes; ++l) {
      const RowCol a = q_fragment_address(l, kk);
      CHECK(a.col % 8 == 0);  // 16-byte aligned for 16-bit elements
      ++seen[size_t(a.row * 8 + a.col / 8)];
    }
    int distinct = 0;
    for (int n : seen) distinct += n == 1;
    CHECK(distinct == kLanes);
  }
}

TEST_CASE("mma fragments: P read back from S's accumulators is the A operand of the next product") {
  // Accumulator pair (pair, pair + 1) of n-tile 2 kk + ntile holds, lane for lane, A's elements 2r, 2r + 1.
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        const AccumulatorPair src = p_register_source(r);
        const RowCol c = c_element(l, src.pair + h), a = a_element(l, 2 * r + h);
        CHECK(a.row == c.row);
        CHECK(a.col == src.ntile * 8 + c.col);
      }
}

TEST_CASE("mma fragments: an emulated warp computes the forward's S = Q K^T and O = P V exactly") {
  for (int D : {64, 128}) {
    Tile q(16, D, 8, 1), k(64, D, 8, 2), v(64, D, 8, 3);
    const std::vector<Accumulator> s = scores(q, k, D);
    CHECK(holds(s, [&](int i, int j) {
      float d = 0;
      for (int e = 0; e < D; ++e) d += q.at(i, e) * k.at(j, e);
      return d;
    }));
    // O (16, D) = P (16, 64) V (64, D), P = S (integers: exact), as the kernel feeds it: A registers
    // from S's accumulators, V through ldmatrix.trans.
    std::vector<Accumulator> o(size_t(D / 8), Accumulator{});
    for (int kk = 0; kk < 4; ++kk) {
      Fragment p{};
      for (int l = 0; l < kLanes; ++l)
        for (int r = 0; r < 4; ++r) {
          const AccumulatorPair src = p_register_source(r);
          for (int h = 0; h < 2; ++h)
            p[size_t(l)][size_t(r)][size_t(h)] = s[size_t(2 * kk + src.ntile)][size_t(l)][size_t(src.pair + h)];
        }
      for (int nb = 0; nb < D / 16; ++nb) {
        const Fragment vf = ldmatrix_x4(
            v, [&](int l) { return v_fragment_address(l, kk, nb * 16); }, true);
        mma(o[size_t(2 * nb)], p, vf, 0);
        mma(o[size_t(2 * nb + 1)], p, vf, 2);
      }
    }
    CHECK(holds(o, [&](int i, int e) {
      float d = 0;
      for (int j = 0; j < 64; ++j) {
        float sij = 0;
        for (int x = 0; x < D; ++x) sij += q.at(i, x) * k.at(j, x);
        d += sij * v.at(j, e);
      }
      return d;
    }));
  }
}

TEST_CASE("mma fragments: the emulation fails a kernel that swaps two ldmatrix matrices") {
  Tile q(16, 64, 8, 4), k(64, 64, 8, 5);
  auto swapped = [](int lane, int key0, int kk) {  // the B registers of keys 8-15 and columns 8-15 exchanged
    const int m = ldmatrix_matrix(lane);
    return RowCol{key0 + ldmatrix_row(lane) + (m & 1) * 8, kk * 16 + (m >> 1) * 8};
  };
  const std::vector<Accumulator> s = scores(q, k, 64, swapped);
  CHECK_FALSE(holds(s, [&](int i, int j) {
    float d = 0;
    for (int e = 0; e < 64; ++e) d += q.at(i, e) * k.at(j, e);
    return d;
  }));
}
