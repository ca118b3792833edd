// max_pool2d, avg_pool2d and adaptive_avg_pool2d, forward and backward, against double-precision
// reference loops in every floating dtype (padding, count_include_pad, non-divisible sizes,
// strided inputs), by gradcheck, NaN propagation, and every error message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mdl.h"
#include "nn/functional.h"
#include "kernels/pool.h"
#include "switches/list/toggles.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;
using F::Pair;
using V = std::vector<double>;

namespace {


double max_err(const V& a, const V& b) {
  REQUIRE(a.size() == b.size());
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

// Distinct values (no ties in max pooling) in a shuffled order, as an f64 tensor of shape s.
Tensor distinct(const Shape& s, Generator& gen) {
  return reshape(randperm(shape_numel(s), &gen).to(kF64) * (1.0 / double(shape_numel(s))) - 0.5, s);
}

// (N, C, H, W) as every other column of an (N, C, H, 2W) leaf, or the leaf itself.
Tensor strided_view(const Tensor& leaf, bool strided) { return strided ? slice(leaf, 3, 0, leaf.size(3), 2) : leaf; }

enum class Kind { Max, Avg, AvgNoPad, Adaptive };

struct PoolCase {
  Shape xs;  // (N, C, H, W)
  Pair k, s, p;
  bool strided = false;
};

// The windows of one output cell along one dim: [lo, hi) clipped to the input, and the divisor
// a count_include_pad average uses.
struct Win {
  int64_t lo, hi, padded;
};
Win win(Kind kind, int64_t o, int64_t n_out, int64_t size, int64_t k, int64_t s, int64_t p) {
  if (kind == Kind::Adaptive) {
    const int64_t lo = int64_t(std::floor(double(o * size) / double(n_out)));
    const int64_t hi = int64_t(std::ceil(double((o + 1) * size) / double(n_out)));
    return {lo, hi, hi - lo};
  }
  const int64_t lo = o * s - p, hi = std::min(lo + k, size + p);
  return {std::max<int64_t>(lo, 0), std::min(hi, size), hi - lo};
}

// Forward and backward (for gradient gy) of a pool in double; out has shape (N, C, Ho, Wo).
struct RefPool {
  V out, gx;
};
RefPool ref_pool(Kind kind, const Shape& xs, const V& x, int64_t Ho, int64_t Wo, Pair k, Pair s, Pair p, const V& gy) {
  const int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3];
  RefPool r{V(size_t(NC * Ho * Wo)), V(x.size(), 0.0)};
  for (int64_t q = 0; q < NC; ++q)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const Win a = win(kind, oh, Ho, H, k[0], s[0], p[0]), b = win(kind, ow, Wo, W, k[1], s[1], p[1]);
        const size_t o = size_t((q * Ho + oh) * Wo + ow);
        const double g = gy.empty() ? 0.0 : gy[o];
        if (kind == Kind::Max) {
          double best = -std::numeric_limits<double>::infinity();
          size_t arg = 0;
          for (int64_t h = a.lo; h < a.hi; ++h)
            for (int64_t w = b.lo; w < b.hi; ++w) {
              const size_t i = size_t((q * H + h) * W + w);
              if (x[i] > best) best = x[i], arg = i;
            }
          r.out[o] = best;
          r.gx[arg] += g;
        } else {
          const double div = kind == Kind::AvgNoPad ? double((a.hi - a.lo) * (b.hi - b.lo))
                                                    : double(a.padded * b.padded);
          double sum = 0;
          for (int64_t h = a.lo; h < a.hi; ++h)
            for (int64_t w = b.lo; w < b.hi; ++w) sum += x[size_t((q * H + h) * W + w)];
          r.out[o] = sum / div;
          for (int64_t h = a.lo; h < a.hi; ++h)
            for (int64_t w = b.lo; w < b.hi; ++w) r.gx[size_t((q * H + h) * W + w)] += g / div;
        }
      }
  return r;
}

Tensor pool(Kind kind, const Tensor& x, const PoolCase& c) {
  switch (kind) {
    case Kind::Max: return F::max_pool2d(x, c.k, c.s, c.p);
    case Kind::Avg: return F::avg_pool2d(x, c.k, c.s, c.p, true);
    case Kind::AvgNoPad: return F::avg_pool2d(x, c.k, c.s, c.p, false);
    case Kind::Adaptive: return F::adaptive_avg_pool2d(x, c.k);  // k is the output size
  }
  return Tensor();
}

const char* kind_name(Kind k) {
  return k == Kind::Max ? "max" : k == Kind::Avg ? "avg" : k == Kind::AvgNoPad ? "avg (no pad count)" : "adaptive";
}

std::vector<PoolCase> window_cases() {
  return {
      {{2, 3, 8, 8}, {2, 2}, {0, 0}, {0, 0}},        // stride defaults to the kernel
      {{1, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1}, true},  // padded, odd sizes, strided input
      {{3, 2, 6, 10}, {3, 2}, {1, 2}, {1, 0}},       // non-square everything
      {{2, 4, 5, 5}, {5, 5}, {1, 1}, {2, 2}},        // window over the whole padded input
      {{2, 3, 9, 6}, {2, 3}, {3, 1}, {1, 1}, true},  {{0, 3, 4, 4}, {2, 2}, {0, 0}, {0, 0}},  // empty batch
      {{4, 16, 32, 32}, {3, 3}, {2, 2}, {1, 1}},                                              // many planes: threaded
      {{2, 3, 28, 28}, {2, 2}, {0, 0}, {0, 0}},       // 2x2 on f32 vectors: rows of 14, the last vector overlaps
      {{1, 2, 9, 11}, {2, 2}, {0, 0}, {0, 0}, true},  // odd H and W (the last row and column unused), strided
      {{5, 7, 6, 6}, {2, 2}, {0, 0}, {0, 0}},  // 35 small planes: f16/bf16 backwards round blocks of 16, one partial
  };
}

std::vector<PoolCase> adaptive_cases() {
  return {
      {{2, 3, 7, 5}, {3, 4}, {}, {}},        // non-divisible: overlapping windows
      {{1, 2, 3, 3}, {5, 2}, {}, {}, true},  // larger output than input
      {{2, 2, 8, 8}, {1, 1}, {}, {}},        // global average
      {{3, 4, 6, 9}, {6, 9}, {}, {}},        // identity
      {{2, 8, 32, 32}, {7, 7}, {}, {}},
  };
}

int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p) { return (in + 2 * p - k) / s + 1; }

void check_against_reference(Kind kind, const PoolCase& c0, DType t, Generator& gen) {
  PoolCase c = c0;
  if (c.s == Pair{0, 0} && kind != Kind::Adaptive) c.s = c.k;
  const int64_t Ho = kind == Kind::Adaptive ? c.k[0] : pooled(c.xs[2], c.k[0], c.s[0], c.p[0]);
  const int64_t Wo = kind == Kind::Adaptive ? c.k[1] : pooled(c.xs[3], c.k[1], c.s[1], c.p[1]);
  Shape ls = c.xs;
  if (c.strided) ls[3] *= 2;
  Tensor leaf = distinct(ls, gen).to(t);
  leaf.requires_grad_();
  Tensor x = strided_view(leaf, c.strided);
  Tensor y = pool(kind, x, c0);
  CHECK(y.shape() == Shape{c.xs[0], c.xs[1], Ho, Wo});
  CHECK(y.dtype() == t);
  Tensor gy = randn(y.shape(), t, &gen);
  sum(y * gy).backward();
  const RefPool r = ref_pool(kind, c.xs, values(x), Ho, Wo, c.k, c.s, c.p, values(gy));
  const double tol = t == kF64 ? 1e-14 : t == kF32 ? 1e-6 : t == kF16 ? 2e-3 : 2e-2;
  CHECK(max_err(values(y), r.out) <= tol);
  CHECK(max_err(values(strided_view(leaf.grad(), c.strided)), r.gx) <= tol * 4);
}

}  // namespace

TEST_CASE("pool: max and avg pooling match the reference, forward and backward, every dtype") {
  Generator gen(31);
  for (Kind kind : {Kind::Max, Kind::Avg, Kind::AvgNoPad})
    for (const PoolCase& c : window_cases())
      for (DType t : {kF32, kF64, kF16, kBF16}) {
        INFO(kind_name(kind), " x ", shape_str(c.xs), " kernel ", c.k[0], "x", c.k[1], " stride ", c.s[0], ",", c.s[1],
             " pad ", c.p[0], ",", c.p[1], c.strided ? " strided" : "", " ", t);
        check_against_reference(kind, c, t, gen);
      }
}

TEST_CASE("pool: adaptive average pooling matches PyTorch's floor/ceil windows") {
  Generator gen(32);
  for (const PoolCase& c : adaptive_cases())
    for (DType t : {kF32, kF64, kBF16}) {
      INFO("x ", shape_str(c.xs), " -> ", c.k[0], "x", c.k[1], c.strided ? " strided" : "", " ", t);
      check_against_reference(Kind::Adaptive, c, t, gen);
    }
  // 5 -> 3: windows [0,2), [1,4), [3,5).
  Tensor x = reshape(arange(5.0, kF64), {1, 1, 1, 5});
  CHECK(values(F::adaptive_avg_pool2d(x, {1, 3})) == V{0.5, 2.0, 3.5});
}

TEST_CASE("pool: known values, NaN propagation, unbatched input") {
  Tensor x = reshape(arange(16.0, kF32), {1, 1, 4, 4});
  CHECK(values(F::max_pool2d(x, {2, 2})) == V{5, 7, 13, 15});
  CHECK(values(F::avg_pool2d(x, {2, 2})) == V{2.5, 4.5, 10.5, 12.5});
  // Padding: with count_include_pad the corner window [0,0] holds one real element and three pads.
  CHECK(values(F::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, true))[0] == doctest::Approx(0.0 / 4));
  CHECK(values(F::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, true))[1] == doctest::Approx((1.0 + 2.0) / 4));
  CHECK(values(F::avg_pool2d(x, {2, 2}, {2, 2}, {1, 1}, false))[1] == doctest::Approx((1.0 + 2.0) / 2));
  // A padded max pool over negative values ignores the padding.
  CHECK(values(F::max_pool2d(x * -1.0 - 1.0, {3, 3}, {1, 1}, {1, 1}))[0] == -1.0);

  Tensor n = from_vector<float>({1, std::nanf(""), 3, 4}, {1, 1, 2, 2});
  CHECK(std::isnan(values(F::max_pool2d(n, {2, 2}))[0]));
  CHECK(std::isnan(values(F::avg_pool2d(n, {2, 2}))[0]));

  // The f32 vector path (rows of 4 or more outputs): NaN wins wherever it sits in its window, and
  // ties go to the first element in row-major order, as in the scalar loop.
  for (int at = 0; at < 4; ++at) {
    std::vector<float> v(2 * 10, 1.0f);
    v[size_t((at / 2) * 10 + 6 + at % 2)] = std::nanf("");  // window 3 (columns 6, 7)
    Tensor nv = from_vector(v, {1, 1, 2, 10});
    NoGradGuard ng;
    const Tensor out = F::max_pool2d(nv, {2, 2});
    const V got = values(out);
    CHECK(got[0] == 1.0);
    CHECK(std::isnan(got[3]));
    CHECK(got[4] == 1.0);
    Tensor idx = make_tensor({1, 1, 1, 5}, kI64, Device::cpu()), o = make_tensor({1, 1, 1, 5}, kF32, Device::cpu());
    kernels::max_pool2d_forward(Device::cpu(), o, idx, nv, kernels::Pool2dParams{2, 2, 2, 2, 0, 0});
    const std::vector<int64_t> iv = idx.to_vector<int64_t>();
    CHECK(iv == std::vector<int64_t>{0, 2, 4, (at / 2) * 10 + 6 + at % 2, 8});  // ties: the window's first
    toggles::set_max_pool_vectorized(false);                                    // the scalar loop agrees, indices too
    Tensor idx2 = make_tensor({1, 1, 1, 5}, kI64, Device::cpu());
    kernels::max_pool2d_forward(Device::cpu(), o, idx2, nv, kernels::Pool2dParams{2, 2, 2, 2, 0, 0});
    toggles::set_max_pool_vectorized(true);
    CHECK(idx2.to_vector<int64_t>() == iv);
  }
  {  // both paths on random data with ties (values from a small set), indices compared
    std::vector<float> rv(3 * 5 * 12 * 26);
    for (size_t i = 0; i < rv.size(); ++i) rv[i] = float((i * 7919 + i / 5) % 4);
    const Tensor r = from_vector(rv, {3, 5, 12, 26});
    Tensor ia = make_tensor({3, 5, 6, 13}, kI64, Device::cpu()), ib = make_tensor({3, 5, 6, 13}, kI64, Device::cpu());
    Tensor oa = make_tensor({3, 5, 6, 13}, kF32, Device::cpu()), ob = make_tensor({3, 5, 6, 13}, kF32, Device::cpu());
    kernels::max_pool2d_forward(Device::cpu(), oa, ia, r, kernels::Pool2dParams{2, 2, 2, 2, 0, 0});
    toggles::set_max_pool_vectorized(false);
    kernels::max_pool2d_forward(Device::cpu(), ob, ib, r, kernels::Pool2dParams{2, 2, 2, 2, 0, 0});
    toggles::set_max_pool_vectorized(true);
    CHECK(ia.to_vector<int64_t>() == ib.to_vector<int64_t>());
    CHECK(values(oa) == values(ob));
  }

  Tensor u = randn({3, 6, 6});
  CHECK(F::max_pool2d(u, {2, 2}).shape() == Shape{3, 3, 3});
  CHECK(values(F::avg_pool2d(u, {3, 3})) == values(F::avg_pool2d(unsqueeze(u, 0), {3, 3})));
  CHECK(F::adaptive_avg_pool2d(u, {2, 1}).shape() == Shape{3, 2, 1});
}

const test::GradcheckCases kPoolGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator gen(33);
  using Vt = std::vector<Tensor>;
  auto leaf = [](Tensor t) {
    t.requires_grad_();
    return t;
  };
  auto T = [](const Tensor& t) { return transpose(t, 2, 3); };
  const test::GradcheckCase cases[] = {
      {"max_pool2d",
       "3x3 stride 2 pad 1, transposed input",
       {leaf(distinct({2, 2, 7, 6}, gen))},
       [T](const Vt& v) {
         return F::max_pool2d(T(v[0]), {3, 3}, {2, 2}, {1, 1});
       }},
      {"max_pool2d",
       "2x2 overlapping (stride 1), non-square",
       {leaf(distinct({1, 3, 5, 4}, gen))},
       [](const Vt& v) {
         return F::max_pool2d(v[0], {2, 3}, {1, 1});
       }},
      {"avg_pool2d",
       "3x3 stride 2 pad 1, count_include_pad",
       {leaf(randn({2, 2, 7, 6}, kF64, &gen))},
       [T](const Vt& v) {
         return F::avg_pool2d(T(v[0]), {3, 3}, {2, 2}, {1, 1}, true);
       }},
      {"avg_pool2d",
       "3x2 stride (1,2) pad (1,1), count_include_pad=false",
       {leaf(randn({1, 2, 5, 6}, kF64, &gen))},
       [](const Vt& v) {
         return F::avg_pool2d(v[0], {3, 2}, {1, 2}, {1, 1}, false);
       }},
      {"adaptive_avg_pool2d",
       "7x5 -> 3x4",
       {leaf(randn({2, 2, 7, 5}, kF64, &gen))},
       [](const Vt& v) {
         return F::adaptive_avg_pool2d(v[0], {3, 4});
       }},
      {"adaptive_avg_pool2d",
       "3x3 -> 5x2, transposed input",
       {leaf(randn({1, 2, 3, 3}, kF64, &gen))},
       [T](const Vt& v) {
         return F::adaptive_avg_pool2d(T(v[0]), {5, 2});
       }},
  };
  t.insert(t.end(), std::begin(cases), std::end(cases));
});

TEST_CASE("pool: errors name the op, the shapes and the options") {
  auto throws = [](auto f, const char* msg) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(msg), mdl::Error); };
  const Tensor x = zeros({2, 3, 4, 4});
  throws(
      [] {
        F::max_pool2d(zeros({4, 4}), {2, 2});
      },
      "max_pool2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape [4,4]");
  throws(
      [] {
        F::avg_pool2d(zeros({1, 2, 3, 4, 4}), {2, 2});
      },
      "avg_pool2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape [1,2,3,4,4]");
  throws([&] { F::max_pool2d(x, {0, 2}); }, "max_pool2d: kernel size must be positive, got [0,2]");
  throws([&] { F::avg_pool2d(x, {2, 2}, {-1, 1}); }, "avg_pool2d: stride must be positive, got [-1,1]");
  throws(
      [&] {
        F::max_pool2d(x, {3, 3}, {1, 1}, {2, 0});
      },
      "max_pool2d: padding [2,0] must be non-negative and at most half the kernel size [3,3]");
  throws(
      [&] {
        F::avg_pool2d(x, {2, 2}, {1, 1}, {0, -1});
      },
      "avg_pool2d: padding [0,-1] must be non-negative and at most half the kernel size [2,2]");
  throws(
      [&] {
        F::max_pool2d(x, {5, 2});
      },
      "max_pool2d: kernel 5x2 is larger than the padded input 4x4 (input [2,3,4,4], padding [0,0])");
  throws(
      [] {
        F::max_pool2d(zeros({2, 3, 4, 4}, kI64), {2, 2});
      },
      "max_pool2d: expected a floating input (f32, f16, bf16, f64), got i64 of shape [2,3,4,4]");
  throws([&] { F::adaptive_avg_pool2d(x, {0, 2}); }, "adaptive_avg_pool2d: output size must be positive, got [0,2]");
  throws(
      [] {
        F::adaptive_avg_pool2d(zeros({2, 3, 0, 4}), {2, 2});
      },
      "adaptive_avg_pool2d: input [2,3,0,4] has an empty spatial dim");
  throws(
      [] {
        F::adaptive_avg_pool2d(zeros({2, 3}), {2, 2});
      },
      "adaptive_avg_pool2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape [2,3]");
}

TEST_CASE("pool: called from inside a caller's parallel region") {
  // 16-bit backward passes accumulate in per-thread float planes; nested, they use the caller's.
  Generator gen(34);
  Tensor x = distinct({2, 3, 8, 8}, gen).to(kF16);
  const kernels::Pool2dParams p{3, 3, 2, 2, 1, 1};
  Tensor out = empty({2, 3, 4, 4}, kF16), idx = empty({2, 3, 4, 4}, kI64);
  kernels::max_pool2d_forward(Device::cpu(), out, idx, x, p);
  Tensor gy = randn(out.shape(), kF16, &gen);
  Tensor ref_max = empty(x.shape(), kF16), ref_avg = empty(x.shape(), kF16);
  kernels::max_pool2d_backward(Device::cpu(), ref_max, gy, idx);
  kernels::avg_pool2d_backward(Device::cpu(), ref_avg, gy, p, true);
  std::vector<Tensor> gmax(4), gavg(4);
  for (int i = 0; i < 4; ++i) {
    gmax[size_t(i)] = empty(x.shape(), kF16);
    gavg[size_t(i)] = empty(x.shape(), kF16);
  }
#pragma omp parallel for num_threads(2)
  for (int i = 0; i < 4; ++i) {
    kernels::max_pool2d_backward(Device::cpu(), gmax[size_t(i)], gy, idx);
    kernels::avg_pool2d_backward(Device::cpu(), gavg[size_t(i)], gy, p, true);
  }
  for (int i = 0; i < 4; ++i) {
    CHECK(values(gmax[size_t(i)]) == values(ref_max));
    CHECK(values(gavg[size_t(i)]) == values(ref_avg));
  }
}
