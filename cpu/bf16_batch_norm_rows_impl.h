// The body of Bf16BatchNormRows (cpu/bf16_batch_norm_rows.h) on one GCC float vector type V, included by
// cpu/norm.cpp (4 floats) and by cpu/bf16_batch_norm_rows_avx2.cpp (8) and _avx512.cpp (16) inside
// their target regions. Everything here has internal linkage and calls no shared inline function, so
// no copy compiled for a wider target can stand in for the baseline one. The formulas are
// kernels/norm_math.h's, written again on vectors; in the AVX2 and AVX-512 regions the compiler fuses
// (x - mean) * a + b into one FMA, so an output can differ from the 4-float loops' by a bf16 rounding,
// and the ReLU's mask with it where the pre-activation is within a rounding of 0 (a width's forward
// and backward compute it alike).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "cpu/bf16_batch_norm_rows.h"
#include "cpu/bf16_vectors.h"
#include "cpu/float_vectors.h"

namespace mdl::cpu::bf16_batch_norm_rows_impl {

namespace {

using float_vectors::kWidth;
using namespace bf16_vectors;

// The sum of v's lanes, halving: log2(width) dependent adds, where lane by lane a block's sum waited
// on width - 1 of them.
template <class V>
[[gnu::always_inline]] inline float lane_sum(V v) {
  if constexpr (kWidth<V> == 4) {
    return (v[0] + v[2]) + (v[1] + v[3]);
  } else {
    using Half = typename Lanes<kWidth<V>>::Half;
    Half lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return lane_sum(lo + hi);
  }
}

// norm_math's pre_activation, relu gate and activation, on V or float.
template <class U>
[[gnu::always_inline]] inline U pre(U x, const BnAffine& k) {
  return (x - k.mean) * k.a + k.b;
}
template <class U>
[[gnu::always_inline]] inline U gate(U g, U x, const BnAffine* k) {
  if (!k) return g;
  return pre(x, *k) <= 0.0f ? U{} : g;
}
template <class U>
[[gnu::always_inline]] inline U relu(U v) {
  return v > 0.0f ? v : (v != v ? v : U{});
}

template <class U>
[[gnu::always_inline]] inline U load(const uint16_t* p) {
  if constexpr (sizeof(U) == sizeof(float)) return load_bf16_1(p);
  else return load_bf16<U>(p);
}

// The terms summed, as function objects: at<U>(j) on V or float, wide(j) in double. (GCC does not give
// a lambda the target of the #pragma around it.)
struct Value {
  const uint16_t* a;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    return load<U>(a + j);
  }
  double wide(int64_t j) const { return double(load_bf16_1(a + j)); }
};
struct Square {
  const uint16_t* a;
  float centre;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    const U d = load<U>(a + j) - centre;
    return d * d;
  }
  double wide(int64_t j) const {
    const double d = double(load_bf16_1(a + j)) - double(centre);
    return d * d;
  }
};
struct Gated {
  const uint16_t *g, *x;
  const BnAffine* k;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    return gate(load<U>(g + j), load<U>(x + j), k);
  }
  double wide(int64_t j) const { return double(at<float>(j)); }
};
struct GatedTimesDeviation {
  Gated gy;
  float centre;
  template <class U>
  [[gnu::always_inline]] U at(int64_t j) const {
    return gy.at<U>(j) * (load<U>(gy.x + j) - centre);
  }
  double wide(int64_t j) const { return gy.wide(j) * (double(load_bf16_1(gy.x + j)) - double(centre)); }
};

// The sum of term over [j0, j1): float lanes, then the tail, then double; again in double from
// term.wide when the float sum is not finite.
template <class V, class Term>
[[gnu::always_inline]] inline double block_sum(int64_t j0, int64_t j1, const Term& term) {
  V acc = {};
  int64_t j = j0;
  for (; j + kWidth<V> <= j1; j += kWidth<V>) acc += term.template at<V>(j);
  float part = lane_sum(acc);
  for (; j < j1; ++j) part += term.template at<float>(j);
  if (std::isfinite(part)) [[likely]]
    return double(part);
  double total = 0;
  for (j = j0; j < j1; ++j) total += term.wide(j);
  return total;
}

// The sum of term over [0, n) in blocks of kBf16NormBlock.
template <class V, class Term>
double row_sum(int64_t n, const Term& term) {
  double total = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kBf16NormBlock)
    total += block_sum<V>(j0, j0 + kBf16NormBlock < n ? j0 + kBf16NormBlock : n, term);
  return total;
}

// ---- rows of one block: kWidth<V> rows' lane sums at once ----------------------------------------------
// lane_sum halves its vector until one lane is left. Two rows' vectors side by side halve in one add:
// the low halves of each group of 2h lanes of a then b, plus their high halves, give groups of h, in
// order. log2(width) such steps take width rows' vectors to one vector of their sums, each lane the
// same additions as lane_sum's, where one row at a time spent a chain of shuffles on every row.

constexpr int halving_lane(int lane, int h, bool high) { return lane / h * 2 * h + (high ? h : 0) + lane % h; }

template <class V, int H, size_t... L>
[[gnu::always_inline]] inline V halve_pair(V a, V b, std::index_sequence<L...>) {
  return __builtin_shufflevector(a, b, halving_lane(int(L), H, false)...) +
         __builtin_shufflevector(a, b, halving_lane(int(L), H, true)...);
}

// v[0 .. 2H) (groups of 2H lanes) -> v[0 .. H) (groups of H), and on to v[0] = every group's sum.
template <class V, int H>
[[gnu::always_inline]] inline void halve_all(V* v) {
  for (int i = 0; i < H; ++i)
    v[i] = halve_pair<V, H>(v[2 * i], v[2 * i + 1], std::make_index_sequence<size_t(kWidth<V>)>{});
  if constexpr (H > 1) halve_all<V, H / 2>(v);
}

// The float sum of term over [0, n), n <= kBf16NormBlock, from its vector lanes' part `lanes`: the tail
// added, then block_sum's double, or its sum again in double when the float one is not finite.
template <class V, class Term>
[[gnu::always_inline]] inline double finish_block(float lanes, int64_t n, const Term& term) {
  for (int64_t j = n / kWidth<V> * kWidth<V>; j < n; ++j) lanes += term.template at<float>(j);
  if (std::isfinite(lanes)) [[likely]]
    return double(lanes);
  double total = 0;
  for (int64_t j = 0; j < n; ++j) total += term.wide(j);
  return total;
}

// out[r] = row_sum(n, term_of(r)) for rows of n <= kBf16NormBlock values, the same bits: kWidth<V> rows
// at a time with their lane sums side by side.
template <class V, class TermOf>
void short_row_sums(int64_t rows, int64_t n, const TermOf& term_of, double* out) {
  constexpr int W = kWidth<V>;
  int64_t r = 0;
  for (; r + W <= rows; r += W) {
    V acc[W];
    for (int i = 0; i < W; ++i) {
      const auto term = term_of(r + i);
      V a = {};
      for (int64_t j = 0; j + W <= n; j += W) a += term.template at<V>(j);
      acc[i] = a;
    }
    halve_all<V, W / 2>(acc);
    for (int i = 0; i < W; ++i) out[r + i] = finish_block<V>(acc[0][i], n, term_of(r + i));
  }
  for (; r < rows; ++r) out[r] = row_sum<V>(n, term_of(r));
}

template <class V, class TermOf>
void row_sums(int64_t rows, int64_t n, const TermOf& term_of, double* out) {
  if (n <= kBf16NormBlock) return short_row_sums<V>(rows, n, term_of, out);
  for (int64_t r = 0; r < rows; ++r) out[r] = row_sum<V>(n, term_of(r));
}

template <class V>
void sum(const uint16_t* a, int64_t rows, int64_t n, double* out) {
  row_sums<V>(
      rows, n, [&](int64_t r) { return Value{a + r * n}; }, out);
}

template <class V>
void squares(const uint16_t* a, int64_t rows, int64_t n, const float* centre, double* out) {
  row_sums<V>(
      rows, n,
      [&](int64_t r) {
        return Square{a + r * n, centre[r]};
      },
      out);
}

// Both of grad_sums' sums over the whole vectors of [j0, j1) in float lanes, g gated once (GATE: k given);
// returns where the vectors end.
template <class V, bool GATE>
[[gnu::always_inline]] inline int64_t grad_lanes(const uint16_t* g, const uint16_t* x, int64_t j0, int64_t j1,
                                                 float centre, const BnAffine* k, V& acc0, V& acc1) {
  acc0 = acc1 = V{};
  int64_t j = j0;
  for (; j + kWidth<V> <= j1; j += kWidth<V>) {
    const V xv = load<V>(x + j), gv = GATE ? gate(load<V>(g + j), xv, k) : load<V>(g + j);
    acc0 += gv;
    acc1 += gv * (xv - centre);
  }
  return j;
}

// Both of grad_sums' block sums in one walk of the block, g gated once: GATE says whether k is given.
template <class V, bool GATE>
void grad_sums_as(const uint16_t* g, const uint16_t* x, int64_t n, float centre, const BnAffine* k, double* sums) {
  const Gated gy{g, x, GATE ? k : nullptr};
  const GatedTimesDeviation gyx{gy, centre};
  sums[0] = sums[1] = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kBf16NormBlock) {
    const int64_t j1 = j0 + kBf16NormBlock < n ? j0 + kBf16NormBlock : n;
    V acc0, acc1;
    int64_t j = grad_lanes<V, GATE>(g, x, j0, j1, centre, k, acc0, acc1);
    float part0 = lane_sum(acc0), part1 = lane_sum(acc1);
    for (; j < j1; ++j) {
      const float xv = load<float>(x + j), gv = GATE ? gate(load<float>(g + j), xv, k) : load<float>(g + j);
      part0 += gv;
      part1 += gv * (xv - centre);
    }
    if (std::isfinite(part0)) [[likely]] {
      sums[0] += double(part0);
    } else {
      for (j = j0; j < j1; ++j) sums[0] += gy.wide(j);
    }
    if (std::isfinite(part1)) [[likely]] {
      sums[1] += double(part1);
    } else {
      for (j = j0; j < j1; ++j) sums[1] += gyx.wide(j);
    }
  }
}

// grad_sums_as over rows of n <= kBf16NormBlock values, the same bits: kWidth<V> rows at a time, each
// sum's lane sums side by side (short_row_sums).
template <class V, bool GATE>
void short_grad_sums(const uint16_t* g, const uint16_t* x, int64_t rows, int64_t n, const float* centre,
                     const BnAffine* k, double* out) {
  constexpr int W = kWidth<V>;
  const auto gated = [&](int64_t r) { return Gated{g + r * n, x + r * n, GATE ? k + r : nullptr}; };
  int64_t r = 0;
  for (; r + W <= rows; r += W) {
    V acc0[W], acc1[W];
    for (int i = 0; i < W; ++i) {
      const int64_t o = (r + i) * n;
      grad_lanes<V, GATE>(g + o, x + o, 0, n, centre[r + i], GATE ? k + r + i : nullptr, acc0[i], acc1[i]);
    }
    halve_all<V, W / 2>(acc0);
    halve_all<V, W / 2>(acc1);
    for (int i = 0; i < W; ++i) {
      const Gated gy = gated(r + i);
      out[2 * (r + i)] = finish_block<V>(acc0[0][i], n, gy);
      out[2 * (r + i) + 1] = finish_block<V>(acc1[0][i], n, GatedTimesDeviation{gy, centre[r + i]});
    }
  }
  for (; r < rows; ++r) grad_sums_as<V, GATE>(g + r * n, x + r * n, n, centre[r], GATE ? k + r : nullptr, out + 2 * r);
}

template <class V>
void grad_sums(const uint16_t* g, const uint16_t* x, int64_t rows, int64_t n, const float* centre, const BnAffine* k,
               double* out) {
  if (n <= kBf16NormBlock) {
    if (k) short_grad_sums<V, true>(g, x, rows, n, centre, k, out);
    else short_grad_sums<V, false>(g, x, rows, n, centre, k, out);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * n;
    if (k) grad_sums_as<V, true>(g + o, x + o, n, centre[r], k + r, out + 2 * r);
    else grad_sums_as<V, false>(g + o, x + o, n, centre[r], nullptr, out + 2 * r);
  }
}

// y = activate(pre(x) (+ r)), the residual and the ReLU chosen at compile time.
template <class U, bool RES, bool RELU>
[[gnu::always_inline]] inline U forward_one(const uint16_t* x, const uint16_t* r, const BnAffine& k, int64_t j) {
  U v = pre(load<U>(x + j), k);
  if constexpr (RES) v += load<U>(r + j);
  if constexpr (RELU) v = relu(v);
  return v;
}

template <class V, bool RES, bool RELU>
void forward_as(const uint16_t* x, const uint16_t* res, uint16_t* y, int64_t rows, int64_t n, const BnAffine* k) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n, res += RES ? n : 0) {
    const BnAffine kr = k[r];
    int64_t j = 0;
    for (; j + kWidth<V> <= n; j += kWidth<V>) store_bf16(y + j, forward_one<V, RES, RELU>(x, res, kr, j));
    for (; j < n; ++j) store_bf16_1(y + j, forward_one<float, RES, RELU>(x, res, kr, j));
  }
}

template <class V>
void forward(const uint16_t* x, const uint16_t* res, uint16_t* y, int64_t rows, int64_t n, const BnAffine* k,
             bool with_relu) {
  if (res) {
    if (with_relu) forward_as<V, true, true>(x, res, y, rows, n, k);
    else forward_as<V, true, false>(x, res, y, rows, n, k);
  } else {
    if (with_relu) forward_as<V, false, true>(x, res, y, rows, n, k);
    else forward_as<V, false, false>(x, res, y, rows, n, k);
  }
}

// gx = g' * p + x * q + s, g' gated by k's ReLU mask when GATE.
template <class U, bool GATE>
[[gnu::always_inline]] inline U backward_one(const uint16_t* g, const uint16_t* x, float p, float q, float s,
                                             const BnAffine* k, int64_t j) {
  const U xv = load<U>(x + j), gv = GATE ? gate(load<U>(g + j), xv, k) : load<U>(g + j);
  return gv * p + xv * q + s;
}

template <class V, bool GATE>
void backward_as(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t rows, int64_t n, const float* p,
                 const float* q, const float* s, const BnAffine* k) {
  for (int64_t r = 0; r < rows; ++r, g += n, x += n, gx += n) {
    const float pr = p[r], qr = q[r], sr = s[r];
    const BnAffine* kr = GATE ? k + r : nullptr;
    int64_t j = 0;
    for (; j + kWidth<V> <= n; j += kWidth<V>) store_bf16(gx + j, backward_one<V, GATE>(g, x, pr, qr, sr, kr, j));
    for (; j < n; ++j) store_bf16_1(gx + j, backward_one<float, GATE>(g, x, pr, qr, sr, kr, j));
  }
}

template <class V>
void backward(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t rows, int64_t n, const float* p,
              const float* q, const float* s, const BnAffine* k) {
  if (k) backward_as<V, true>(g, x, gx, rows, n, p, q, s, k);
  else backward_as<V, false>(g, x, gx, rows, n, p, q, s, k);
}

}  // namespace

template <class V>
constexpr Bf16BatchNormRows rows() {
  return {int(kWidth<V>), sum<V>, squares<V>, grad_sums<V>, forward<V>, backward<V>};
}

}  // namespace mdl::cpu::bf16_batch_norm_rows_impl
