// The tf32 register layouts of kernels/mma_fragments_tf32.h, checked on the CPU: each layout gives
// every element of its matrix to exactly one (lane, element); a warp emulated with them
// (mma.sync.m16n8k8, operands by 32-bit loads from shared-memory tiles) computes every product of the
// f32 FlashAttention kernels on tensor cores exactly: S = Q K^T, O += P V with P taken straight from
// S's accumulators and V's rows read in their column order, and the backward's dP = dO V^T,
// dv += P^T dO, dk += dS^T Q, dq += dS K. A kernel that took P without relabelling its columns would
// fail here, shown last. And the 3xTF32 split, emulated as cvt.rna rounds, keeps a dot product within
// a few f32 ulps of its f64 value where one TF32 product does not.
#include "kernels/mma_fragments_tf32.h"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "tests/support/warp_emulation.h"

using mdl::mma::RowCol;
namespace tf32 = mdl::mma::tf32;
using namespace mdl::test::warp;

namespace {

using AFragment = std::array<std::array<float, 4>, kLanes>;
using BFragment = std::array<std::array<float, 2>, kLanes>;

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: c (16 x 8) += a (16 x 8) b (8 x 8), each operand
// gathered from the lanes by its layout (the values are exact in tf32, so no rounding is emulated).
void mma(Accumulator& c, const AFragment& a, const BFragment& b) {
  float A[16][8] = {}, B[8][8] = {}, C[16][8] = {};
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < 4; ++i) {
      const RowCol e = tf32::a_element(l, i);
      A[e.row][e.col] = a[size_t(l)][size_t(i)];
    }
    for (int i = 0; i < 2; ++i) {
      const RowCol e = tf32::b_element(l, i);
      B[e.row][e.col] = b[size_t(l)][size_t(i)];
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol e = tf32::c_element(l, i);
      C[e.row][e.col] = c[size_t(l)][size_t(i)];
    }
  }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 8; ++k) C[m][n] += A[m][k] * B[k][n];
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < 4; ++i) {
      const RowCol e = tf32::c_element(l, i);
      c[size_t(l)][size_t(i)] = C[e.row][e.col];
    }
}

// rows_times_rows_t_3xtf32's products for one warp: c[n] += A B, A the 16 rows of a from row a0,
// B[e][j] = b[j][e] (b (64, D)); c[n] the accumulators of b's rows 8n..8n+7.
void rows_times_rows_t(std::vector<Accumulator>& c, const Tile& a, int a0, const Tile& b, int D) {
  for (int kk = 0; kk < D / 8; ++kk) {
    AFragment af{};
    for (int l = 0; l < kLanes; ++l)
      for (int i = 0; i < 4; ++i) {
        const RowCol e = tf32::rows_a_element(l, kk, i);
        af[size_t(l)][size_t(i)] = a.at(a0 + e.row, e.col);
      }
    for (int n = 0; n < 8; ++n) {
      BFragment bf{};
      for (int l = 0; l < kLanes; ++l)
        for (int i = 0; i < 2; ++i) {
          const RowCol e = tf32::rows_t_b_element(l, n * 8, kk, i);
          bf[size_t(l)][size_t(i)] = b.at(e.row, e.col);
        }
      mma(c[size_t(n)], af, bf);
    }
  }
}

// acc_times_rows_3xtf32's products for one warp: c[n] (16, 8n..8n+7 of D) += X b, X (16, 64) in the
// accumulators x (x[kk] for columns 8kk..8kk+7), b (64, D). relabel = false takes A's elements from
// the accumulators in index order, as a kernel that forgot the columns' order would.
void acc_times_rows(std::vector<Accumulator>& c, const std::vector<Accumulator>& x, const Tile& b, int D,
                    bool relabel = true) {
  for (int kk = 0; kk < 8; ++kk) {
    AFragment af{};
    for (int l = 0; l < kLanes; ++l)
      for (int i = 0; i < 4; ++i)
        af[size_t(l)][size_t(i)] = x[size_t(kk)][size_t(l)][size_t(relabel ? tf32::acc_of_a(i) : i)];
    for (int n = 0; n < D / 8; ++n) {
      BFragment bf{};
      for (int l = 0; l < kLanes; ++l)
        for (int i = 0; i < 2; ++i) {
          const RowCol e = tf32::rows_b_element(l, kk * 8, n * 8, i);
          bf[size_t(l)][size_t(i)] = b.at(e.row, e.col);
        }
      mma(c[size_t(n)], af, bf);
    }
  }
}


// The shared-memory banks (4-byte words mod 32) that one load of a warp touches, all distinct.
bool conflict_free(int pitch, const std::function<RowCol(int lane)>& element) {
  std::vector<int> seen(32, 0);
  for (int l = 0; l < kLanes; ++l) {
    const RowCol e = element(l);
    ++seen[size_t((e.row * pitch + e.col) % 32)];
  }
  for (int n : seen)
    if (n != 1) return false;
  return true;
}

// cvt.rna.tf32.f32: x to 10 mantissa bits, to nearest, ties away from zero (finite x).
float to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// a . b with f32 sums of tf32 products as the tensor cores form them (each product of two tf32 values
// is exact in f32), in 3xTF32 (small terms first) or one TF32 product.
float dot_tf32(const std::vector<float>& a, const std::vector<float>& b, bool split) {
  float c = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float ab = to_tf32(a[i]), bb = to_tf32(b[i]);
    if (split) {
      const float as = to_tf32(a[i] - ab), bs = to_tf32(b[i] - bb);
      c += as * bb;
      c += ab * bs;
    }
    c += ab * bb;
  }
  return c;
}

}  // namespace

TEST_CASE("mma tf32 fragments: each layout holds every element of its matrix exactly once") {
  CHECK(covers_once(16, 8, 4, tf32::a_element));
  CHECK(covers_once(8, 8, 2, tf32::b_element));
  CHECK(covers_once(16, 8, 4, tf32::c_element));
  for (int k = 0; k < 8; ++k) CHECK(tf32::k_of_column(tf32::column_of_k(k)) == k);
  // A (16, 8) from accumulators: A's element i is C's element acc_of_a(i), with A's k-index the
  // relabelled column of C.
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < 4; ++i) {
      const RowCol a = tf32::a_element(l, i), c = tf32::c_element(l, tf32::acc_of_a(i));
      CHECK(a.row == c.row);
      CHECK(a.col == tf32::k_of_column(c.col));
    }
}

TEST_CASE("mma tf32 fragments: the kernels' 32-bit shared-memory loads are free of bank conflicts at pitch D + 4") {
  for (int D : {64, 128}) {
    const int pitch = D + 4;
    for (int i = 0; i < 4; ++i) CHECK(conflict_free(pitch, [&](int l) { return tf32::rows_a_element(l, 1, i); }));
    for (int i = 0; i < 2; ++i) {
      CHECK(conflict_free(pitch, [&](int l) { return tf32::rows_t_b_element(l, 8, 1, i); }));
      CHECK(conflict_free(pitch, [&](int l) { return tf32::rows_b_element(l, 8, 16, i); }));
    }
  }
  CHECK_FALSE(conflict_free(64, [](int l) { return tf32::rows_a_element(l, 0, 0); }));  // an unpadded row
}

TEST_CASE("mma tf32 fragments: an emulated warp computes the forward's and backward's products exactly") {
  for (int D : {64, 128}) {
    // Forward: S = Q K^T, O = P V with P = S (integers: exact) from S's accumulators.
    Tile q(64, D, 4, 1), k(64, D, 4, 2), v(64, D, 4, 3), d_o(64, D, 4, 4);
    const int w0 = 16;  // the second warp's rows
    std::vector<Accumulator> s(8, Accumulator{});
    rows_times_rows_t(s, q, w0, k, D);
    auto qk = [&](int i, int j) {
      float x = 0;
      for (int e = 0; e < D; ++e) x += q.at(w0 + i, e) * k.at(j, e);
      return x;
    };
    CHECK(holds(s, qk));
    std::vector<Accumulator> o(size_t(D / 8), Accumulator{});
    acc_times_rows(o, s, v, D);
    CHECK(holds(o, [&](int i, int e) {
      float x = 0;
      for (int j = 0; j < 64; ++j) x += qk(i, j) * v.at(j, e);
      return x;
    }));

    // Backward, dk/dv kernel (rows: keys): S^T = K Q^T, dP^T = V dO^T, dv += P^T dO, dk += dS^T Q with
    // P^T = S^T and dS^T = dP^T (integers standing in for the softmax's values).
    std::vector<Accumulator> st(8, Accumulator{}), dpt(8, Accumulator{});
    rows_times_rows_t(st, k, w0, q, D);
    rows_times_rows_t(dpt, v, w0, d_o, D);
    auto vdo = [&](int j, int i) {
      float x = 0;
      for (int e = 0; e < D; ++e) x += v.at(w0 + j, e) * d_o.at(i, e);
      return x;
    };
    auto kq = [&](int j, int i) {
      float x = 0;
      for (int e = 0; e < D; ++e) x += k.at(w0 + j, e) * q.at(i, e);
      return x;
    };
    CHECK(holds(st, kq));
    CHECK(holds(dpt, vdo));
    std::vector<Accumulator> dv(size_t(D / 8), Accumulator{}), dk(size_t(D / 8), Accumulator{});
    acc_times_rows(dv, st, d_o, D);
    acc_times_rows(dk, dpt, q, D);
    CHECK(holds(dv, [&](int j, int e) {
      float x = 0;
      for (int i = 0; i < 64; ++i) x += kq(j, i) * d_o.at(i, e);
      return x;
    }));
    CHECK(holds(dk, [&](int j, int e) {
      float x = 0;
      for (int i = 0; i < 64; ++i) x += vdo(j, i) * q.at(i, e);
      return x;
    }));

    // Backward, dq kernel (rows: queries): dP = dO V^T, dq += dS K with dS = dP.
    std::vector<Accumulator> dp(8, Accumulator{});
    rows_times_rows_t(dp, d_o, w0, v, D);
    auto dov = [&](int i, int j) {
      float x = 0;
      for (int e = 0; e < D; ++e) x += d_o.at(w0 + i, e) * v.at(j, e);
      return x;
    };
    CHECK(holds(dp, dov));
    std::vector<Accumulator> dq(size_t(D / 8), Accumulator{});
    acc_times_rows(dq, dp, k, D);
    CHECK(holds(dq, [&](int i, int e) {
      float x = 0;
      for (int j = 0; j < 64; ++j) x += dov(i, j) * k.at(j, e);
      return x;
    }));
  }
}

TEST_CASE("mma tf32 fragments: the emulation fails a kernel that takes P's columns unrelabelled") {
  Tile q(16, 64, 4, 5), k(64, 64, 4, 6), v(64, 64, 4, 7);
  std::vector<Accumulator> s(8, Accumulator{});
  rows_times_rows_t(s, q, 0, k, 64);
  std::vector<Accumulator> o(8, Accumulator{});
  acc_times_rows(o, s, v, 64, false);
  CHECK_FALSE(holds(o, [&](int i, int e) {
    float x = 0;
    for (int j = 0; j < 64; ++j) {
      float sij = 0;
      for (int f = 0; f < 64; ++f) sij += q.at(i, f) * k.at(j, f);
      x += sij * v.at(j, e);
    }
    return x;
  }));
}

TEST_CASE("mma tf32 fragments: 3xTF32 keeps a dot product near f32 accuracy, one TF32 product does not") {
  CHECK(to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);  // a tie rounds away from zero
  CHECK(to_tf32(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f));
  CHECK(to_tf32(1.0f + 0x1p-12f) == 1.0f);
  std::mt19937 gen(11);
  std::normal_distribution<float> normal;
  double worst_split = 0, mean_plain = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> a(128), b(128);
    for (size_t i = 0; i < a.size(); ++i) a[i] = normal(gen), b[i] = std::abs(normal(gen));
    double want = 0, mag = 0;  // b >= 0 keeps the sum from cancelling, so the error is relative to the sum
    for (size_t i = 0; i < a.size(); ++i) want += double(a[i]) * double(b[i]), mag += std::abs(double(a[i]) * b[i]);
    worst_split = std::max(worst_split, std::abs(dot_tf32(a, b, true) - want) / mag);
    mean_plain += std::abs(dot_tf32(a, b, false) - want) / mag / 200;
  }
  // 3xTF32 drops terms of 2^-22 of each product and sums in f32: a few 2^-24 ~ 6e-8 of the terms'
  // magnitudes (1.4e-7 here at worst). One TF32 product rounds each operand by up to 2^-11, errors that
  // grow as a random walk: 3e-5 of the magnitudes on average here.
  CHECK(worst_split < 5e-7);
  CHECK(mean_plain > 1e-5);
}
