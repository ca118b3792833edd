// The body of LossRows (cpu/loss_rows.h) on one GCC float vector type V, included by cpu/loss.cpp
// (4 floats) and by cpu/loss_rows_avx2.cpp (8) and cpu/loss_rows_avx512.cpp (16) inside their
// target regions. A row's tail runs one element at a time through the same polynomial, so each
// element's exp is the vector one.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

#include "cpu/loss_rows.h"
#include "cpu/vec_math.h"

namespace mdl::cpu::loss_rows_impl {

namespace {

template <class V>
constexpr int kWidth = int(sizeof(V) / sizeof(float));

template <class V>
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
[[gnu::always_inline]] inline float exp1(float x) {
  return vecmath::exp_v(V{} + x)[0];
}

// The lanes' sum in double, pairwise.
template <class V>
[[gnu::always_inline]] inline double hsum(V v) {
  double s[kWidth<V>];
  for (int i = 0; i < kWidth<V>; ++i) s[i] = double(v[i]);
  for (int n = kWidth<V>; n > 1; n /= 2)
    for (int i = 0; i < n / 2; ++i) s[i] = s[2 * i] + s[2 * i + 1];
  return s[0];
}

inline float nan_max(float m, float v) { return (v > m || v != v) && m == m ? v : m; }

template <class V>
float row_max(const float* p, int64_t C) {
  constexpr int W = kWidth<V>;
  float m = -std::numeric_limits<float>::infinity();
  V mv = V{} + m;
  int64_t c = 0;
  for (; c + W <= C; c += W) {
    const V v = load<V>(p + c);
    mv = (((v > mv) | (v != v)) & (mv == mv)) ? v : mv;
  }
  for (int j = 0; j < W; ++j) m = nan_max(m, mv[j]);
  for (; c < C; ++c) m = nan_max(m, p[c]);
  return m;
}

template <class V>
void row_sums(const float* p, int64_t C, float m, double& sum_exp, double& sum_x) {
  constexpr int W = kWidth<V>;
  sum_exp = 0;
  sum_x = 0;
  for (int64_t b = 0; b < C; b += kLossBlock) {
    const int64_t e = b + kLossBlock < C ? b + kLossBlock : C;
    V ev = V{}, xv = V{};
    int64_t c = b;
    for (; c + W <= e; c += W) {
      const V v = load<V>(p + c);
      ev += vecmath::exp_v(v - m);
      xv += v;
    }
    double se = hsum(ev), sx = hsum(xv);
    for (; c < e; ++c) {
      se += double(exp1<V>(p[c] - m));
      sx += double(p[c]);
    }
    sum_exp += se;
    sum_x += sx;
  }
}

template <class V>
void row_grad(float* out, const float* p, int64_t C, float m, float logsum, float g, float off) {
  constexpr int W = kWidth<V>;
  int64_t c = 0;
  for (; c + W <= C; c += W) {
    const V v = g * (vecmath::exp_v((load<V>(p + c) - m) - logsum) - off);
    std::memcpy(out + c, &v, sizeof v);
  }
  for (; c < C; ++c) out[c] = g * (exp1<V>((p[c] - m) - logsum) - off);
}

template <class V>
constexpr LossRows rows() {
  return {kWidth<V>, row_max<V>, row_sums<V>, row_grad<V>};
}

}  // namespace

}  // namespace mdl::cpu::loss_rows_impl
