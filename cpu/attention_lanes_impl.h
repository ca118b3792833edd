// The body of AttentionLanes (cpu/attention_lanes.h) on one GCC float vector type V, included by
// cpu/attention_lanes.cpp (4 floats) and by cpu/attention_lanes_avx2.cpp (8) and
// cpu/attention_lanes_avx512.cpp (16) inside their target regions. Each column block runs down the
// rows in order, so a column's sums add its rows in the order a scalar loop would.
#pragma once
#include <cstdint>
#include <limits>

#include "cpu/attention_lanes.h"
#include "cpu/float_vectors.h"
#include "cpu/vec_math.h"

namespace mdl::cpu::attention_lanes_impl {

namespace {

using float_vectors::kWidth;
using float_vectors::load;
using float_vectors::store;

template <class V>
[[gnu::always_inline]] inline V nan_max(V m, V x) {
  return ((x > m) | (x != x)) ? x : m;
}

// Even and odd rows in separate maxima: one chain of compare and select per row is latency-bound.
template <class V>
void max(const float* st, int64_t rows, int64_t width, float* mx) {
  for (int64_t c = 0; c < width; c += kWidth<V>) {
    V even = V{} - std::numeric_limits<float>::infinity(), odd = even;
    int64_t j = 0;
    for (; j + 1 < rows; j += 2) {
      even = nan_max(even, load<V>(st + j * width + c));
      odd = nan_max(odd, load<V>(st + (j + 1) * width + c));
    }
    if (j < rows) even = nan_max(even, load<V>(st + j * width + c));
    store(mx + c, nan_max(even, odd));
  }
}

template <class V>
void exp(float* st, int64_t rows, int64_t width, const float* sub, float* sum) {
  for (int64_t c = 0; c < width; c += kWidth<V>) {
    const V d = load<V>(sub + c);
    V s = {};
    for (int64_t j = 0; j < rows; ++j) {
      const V x = vecmath::exp_v(load<V>(st + j * width + c) - d);  // vec_math.h, ~1 ulp
      store(st + j * width + c, x);
      s += x;
    }
    if (sum) store(sum + c, s);
  }
}

template <class V>
void scale(float* st, int64_t rows, int64_t width, const float* by) {
  for (int64_t c = 0; c < width; c += kWidth<V>) {
    const V b = load<V>(by + c);
    for (int64_t j = 0; j < rows; ++j) store(st + j * width + c, load<V>(st + j * width + c) * b);
  }
}

template <class V>
void softmax_grad(const float* p, float* d, int64_t rows, int64_t width, float* D) {
  for (int64_t c = 0; c < width; c += kWidth<V>) {
    V s = {};
    for (int64_t j = 0; j < rows; ++j) s += load<V>(p + j * width + c) * load<V>(d + j * width + c);
    store(D + c, s);
    for (int64_t j = 0; j < rows; ++j) {
      float* dr = d + j * width + c;
      store(dr, load<V>(p + j * width + c) * (load<V>(dr) - s));
    }
  }
}

}  // namespace

template <class V>
constexpr AttentionLanes lanes() {
  return {kWidth<V>, max<V>, exp<V>, scale<V>, softmax_grad<V>};
}

}  // namespace mdl::cpu::attention_lanes_impl
