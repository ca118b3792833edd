// The body of SoftmaxRows (cpu/softmax_rows.h) on one GCC float vector type V, included by
// cpu/softmax.cpp (4 floats) and by cpu/softmax_rows_avx2.cpp (8) and cpu/softmax_rows_avx512.cpp
// (16) inside their target regions. A row's tail runs one element at a time through the same
// polynomial, so each element's exp is the vector one. Sums run in float lanes within blocks
// (kSoftmaxBlock classes for the loss, kSumBlock for softmax), then fold into double.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu/float_vectors.h"
#include "cpu/softmax_rows.h"
#include "cpu/vec_math.h"

namespace mdl::cpu::softmax_rows_impl {

namespace {

using float_vectors::kWidth;
using float_vectors::load;
using float_vectors::store;

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
  for (int64_t b = 0; b < C; b += kSoftmaxBlock) {
    const int64_t e = b + kSoftmaxBlock < C ? b + kSoftmaxBlock : C;
    V ev = V{}, xv = V{};
    int64_t c = b;
    for (; c + W <= e; c += W) {
      const V d = load<V>(p + c) - m;
      ev += vecmath::exp_v(d);
      xv += d;
    }
    double se = hsum(ev), sx = hsum(xv);
    for (; c < e; ++c) {
      se += double(exp1<V>(p[c] - m));
      sx += double(p[c] - m);
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
    store(out + c, g * (vecmath::exp_v((load<V>(p + c) - m) - logsum) - off));
  }
  for (; c < C; ++c) out[c] = g * (exp1<V>((p[c] - m) - logsum) - off);
}

constexpr int64_t kSumBlock = 256;

template <class V>
void forward(const float* x, float* y, int64_t n, bool log) {
  constexpr int W = kWidth<V>;
  const float mx = row_max<V>(x, n);
  double s = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t e = b + kSumBlock < n ? b + kSumBlock : n;
    V acc = V{};
    int64_t i = b;
    for (; i + W <= e; i += W) {
      const V ev = vecmath::exp_v(load<V>(x + i) - mx);
      if (!log) store(y + i, ev);
      acc += ev;
    }
    double t = hsum(acc);
    for (; i < e; ++i) {
      const float ei = exp1<V>(x[i] - mx);
      if (!log) y[i] = ei;
      t += double(ei);
    }
    s += t;
  }
  int64_t i = 0;
  if (log) {
    const float ls = float(std::log(s));
    for (; i + W <= n; i += W) store(y + i, (load<V>(x + i) - mx) - ls);
    for (; i < n; ++i) y[i] = (x[i] - mx) - ls;
  } else {
    const float inv = float(1.0 / s);
    for (; i + W <= n; i += W) store(y + i, load<V>(y + i) * inv);
    for (; i < n; ++i) y[i] *= inv;
  }
}

template <class V>
void backward(const float* g, const float* y, float* gi, int64_t n, bool log) {
  constexpr int W = kWidth<V>;
  double s = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const int64_t e = b + kSumBlock < n ? b + kSumBlock : n;
    V acc = V{};
    int64_t i = b;
    for (; i + W <= e; i += W) {
      const V gv = load<V>(g + i);
      acc += log ? gv : gv * load<V>(y + i);
    }
    double t = hsum(acc);
    for (; i < e; ++i) t += double(log ? g[i] : g[i] * y[i]);
    s += t;
  }
  const float r = float(s);
  int64_t i = 0;
  if (log) {
    for (; i + W <= n; i += W) store(gi + i, load<V>(g + i) - vecmath::exp_v(load<V>(y + i)) * r);
    for (; i < n; ++i) gi[i] = g[i] - exp1<V>(y[i]) * r;
  } else {
    for (; i + W <= n; i += W) store(gi + i, load<V>(y + i) * (load<V>(g + i) - r));
    for (; i < n; ++i) gi[i] = y[i] * (g[i] - r);
  }
}

template <class V>
constexpr SoftmaxRows rows() {
  return {kWidth<V>, row_max<V>, row_sums<V>, row_grad<V>, forward<V>, backward<V>};
}

}  // namespace

}  // namespace mdl::cpu::softmax_rows_impl
