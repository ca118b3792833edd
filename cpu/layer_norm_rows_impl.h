// The body of LayerNormRows (cpu/layer_norm_rows.h) on one GCC float vector type V, included by
// cpu/norm.cpp (4 floats) and by cpu/layer_norm_rows_avx2.cpp (8) and layer_norm_rows_avx512.cpp
// (16) inside their target regions. The terms summed are function objects, not lambdas: GCC does not
// give a lambda the target of the #pragma around it.
#pragma once
#include <cmath>
#include <cstdint>

#include "cpu/float_vectors.h"
#include "cpu/layer_norm_rows.h"

namespace mdl::cpu::layer_norm_rows_impl {

namespace {

using float_vectors::kWidth;
using float_vectors::load;
using float_vectors::store;

template <class V>
[[gnu::always_inline]] inline float lane_sum(V v) {
  float s = 0;
  for (int64_t i = 0; i < kWidth<V>; ++i) s += v[i];
  return s;
}

// sum_j term(j) for j < n: float lanes within blocks of kLayerNormBlock, each block added in double;
// a block whose float sum is not finite (terms or sums past the float range) is summed again in
// double from term.wide(j).
template <class V, class Term>
[[gnu::always_inline]] inline double block_sum(int64_t n, const Term& term) {
  static_assert(kLayerNormBlock % kWidth<V> == 0);
  double total = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kLayerNormBlock) {
    const int64_t j1 = j0 + kLayerNormBlock < n ? j0 + kLayerNormBlock : n;
    V acc = {};
    int64_t j = j0;
    for (; j + kWidth<V> <= j1; j += kWidth<V>) acc += term.template at<V>(j);
    float part = lane_sum(acc);
    for (; j < j1; ++j) part += term.template at<float>(j);
    if (std::isfinite(part)) [[likely]] {
      total += double(part);
    } else {
      for (int64_t i = j0; i < j1; ++i) total += term.wide(i);
    }
  }
  return total;
}

struct X {
  const float* x;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    return load<U>(x + j);
  }
  double wide(int64_t j) const { return double(x[j]); }
};

struct SquaredDeviation {
  const float* x;
  float m;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    const U d = load<U>(x + j) - m;
    return d * d;
  }
  double wide(int64_t j) const {
    const double d = double(x[j]) - double(m);
    return d * d;
  }
};

struct GradTimesWeight {
  const float* g;
  const float* w;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    return load<U>(g + j) * load<U>(w + j);
  }
  double wide(int64_t j) const { return double(g[j]) * double(w[j]); }
};

struct GradTimesWeightTimesDeviation {
  const float* g;
  const float* w;
  const float* x;
  float m;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    return load<U>(g + j) * load<U>(w + j) * (load<U>(x + j) - m);
  }
  double wide(int64_t j) const { return double(g[j]) * double(w[j]) * (double(x[j]) - double(m)); }
};

template <class V>
void forward(const float* x, float* y, int64_t C, const float* w, const float* b, double eps, float& mean,
             float& rstd) {
  const float m = float(block_sum<V>(C, X{x}) / double(C));
  const double var = block_sum<V>(C, SquaredDeviation{x, m}) / double(C);
  const float rs = float(1.0 / std::sqrt(var + eps));
  mean = m;
  rstd = rs;
  int64_t j = 0;
  for (; j + kWidth<V> <= C; j += kWidth<V>) {
    store(y + j, (load<V>(x + j) - m) * (rs * load<V>(w + j)) + load<V>(b + j));
  }
  for (; j < C; ++j) y[j] = (x[j] - m) * (rs * w[j]) + b[j];
}

template <class V>
void backward(const float* x, const float* g, int64_t C, float m, float rstd, const float* w, float* gx) {
  const double rs = double(rstd);
  const double sh_sum = block_sum<V>(C, GradTimesWeight{g, w});
  const double shx_sum = block_sum<V>(C, GradTimesWeightTimesDeviation{g, w, x, m});
  const double mh = sh_sum / double(C), k = rs * rs * shx_sum / double(C);  // mean(h), mean(h * xhat) * rstd
  // xhat * -k, not (x - m) * (-rstd * k): that product of two factors rstd would leave the float
  // range (flushed to 0 as a denormal) for rows of large values.
  const float rsf = float(rs), q = float(-k), sh = float(-rs * mh);
  int64_t j = 0;
  for (; j + kWidth<V> <= C; j += kWidth<V>) {
    store(gx + j, load<V>(g + j) * (rsf * load<V>(w + j)) + ((load<V>(x + j) - m) * rsf) * q + sh);
  }
  for (; j < C; ++j) gx[j] = g[j] * (rsf * w[j]) + ((x[j] - m) * rsf) * q + sh;
}

// Each product in float, then widened and added in double: the same bits at every width. Left to
// the vectoriser (omp simd), which widens with the target's own conversions.
template <class V>
void param_grads(const float* x, const float* g, int64_t n, float m, float rstd, double* sw, double* sb) {
#pragma omp simd simdlen(kWidth <V>)
  for (int64_t c = 0; c < n; ++c) {
    sw[c] += double(g[c] * ((x[c] - m) * rstd));
    sb[c] += double(g[c]);
  }
}

}  // namespace

template <class V>
constexpr LayerNormRows rows() {
  return {int(kWidth<V>), forward<V>, backward<V>, param_grads<V>};
}

}  // namespace mdl::cpu::layer_norm_rows_impl
