// batch_norm, layer_norm, group_norm, dropout and embedding against plain double loops: strided
// inputs, f16/bf16, running statistics, thread-count independence, gradcheck of each node in f64,
// and every error path.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ops/gradcheck.h"
#include "autograd/node.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "tensor/parallel.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

using V = std::vector<Tensor>;
using Vec = std::vector<double>;

// x's values laid out with the first two dims swapped in memory: a non-contiguous view.
Tensor swapped(const Tensor& x) { return x.transpose(0, 1).contiguous().transpose(0, 1); }


// ---- references in double ----

// x (N, C, S) -> y; mean/var per channel over (N, S) (biased) unless given.
Vec ref_batch_norm(const Vec& x, int64_t N, int64_t C, int64_t S, const Vec& w, const Vec& b, double eps,
                   const Vec* mean_in = nullptr, const Vec* var_in = nullptr) {
  Vec y(x.size());
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    if (mean_in) {
      m = (*mean_in)[c];
      v = (*var_in)[c];
    } else {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) m += x[(n * C + c) * S + s];
      m /= double(N * S);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) v += std::pow(x[(n * C + c) * S + s] - m, 2);
      v /= double(N * S);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        y[i] = (x[i] - m) / std::sqrt(v + eps) * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
      }
  }
  return y;
}

// x (N, C, S) in G groups; w, b per channel. Layer norm is (M, F, 1), G = 1.
Vec ref_group_norm(const Vec& x, int64_t N, int64_t C, int64_t S, int64_t G, const Vec& w, const Vec& b, double eps) {
  Vec y(x.size());
  const int64_t L = C / G * S;
  for (int64_t r = 0; r < N * G; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < L; ++j) m += x[r * L + j];
    m /= double(L);
    for (int64_t j = 0; j < L; ++j) v += std::pow(x[r * L + j] - m, 2);
    v /= double(L);
    for (int64_t j = 0; j < L; ++j) {
      const int64_t c = (r % G) * (C / G) + j / S;
      y[r * L + j] = (x[r * L + j] - m) / std::sqrt(v + eps) * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
    }
  }
  return y;
}

}  // namespace

// ---- batch norm ------------------------------------------------------------------------------

TEST_CASE("norm: batch_norm training normalises with batch statistics, strided inputs, f32/f64") {
  Generator g(1);
  for (DType t : {kF64, kF32}) {
    for (const Shape& s : {Shape{4, 3, 5, 6}, Shape{7, 5}, Shape{3, 2, 9}}) {
      const int64_t N = s[0], C = s[1], S = shape_numel(s) / (N * C);
      Tensor x = swapped(uniform(s, g, -2.0, 3.0, t));
      Tensor w = uniform({C}, g, 0.5, 1.5, t), b = uniform({C}, g, -1.0, 1.0, t);
      Tensor rm = zeros({C}, t), rv = ones({C}, t);
      Tensor y = F::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
      CHECK(y.dtype() == t);
      CHECK(y.shape() == s);
      const Tol tol = t == kF64 ? Tol{1e-12, 1e-14} : Tol{1e-5, 1e-7};
      check_close(y, ref_batch_norm(values(x.contiguous()), N, C, S, values(w), values(b), 1e-5), tol);
      // Without weight and bias.
      Tensor y2 = F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
      check_close(y2, ref_batch_norm(values(x.contiguous()), N, C, S, {}, {}, 1e-5), tol);
    }
  }
}

// With eps = 0 a constant channel (a dead ReLU's zeros) has var + eps = 0: its inverse std is 0, as
// in PyTorch, so its output is its bias and its gradients 0, not NaN.
TEST_CASE("norm: batch_norm with eps 0 maps a constant channel to its bias, with zero gradients") {
  Generator g(3);
  for (DType t : {kF32, kF64, kBF16}) {
    for (bool relu : {false, true}) {
      CAPTURE(t);
      CAPTURE(relu);
      Tensor x = uniform({4, 2, 3, 3}, g, -1, 1, t);
      x.select(1, 0).fill_(0.0);
      Tensor xl = x.clone().requires_grad_(), w = from_vector<float>({1.5f, 0.5f}).requires_grad_(),
             b = from_vector<float>({0.25f, -0.5f}).requires_grad_();
      Tensor rm = zeros({2}), rv = ones({2});
      Tensor y = relu ? F::batch_norm_relu(xl, rm, rv, w, b, true, 0.1, 0.0)
                      : F::batch_norm(xl, rm, rv, w, b, true, 0.1, 0.0);
      CHECK(values(y.select(1, 0)) == Vec(36, 0.25));
      for (double v : values(y)) CHECK(std::isfinite(v));
      y.backward(uniform({4, 2, 3, 3}, g, -1, 1, t));
      CHECK(values(xl.grad().select(1, 0)) == Vec(36, 0.0));
      for (double v : values(xl.grad())) CHECK(std::isfinite(v));
      CHECK(values(w.grad())[0] == 0.0);
      CHECK(std::isfinite(values(w.grad())[1]));
      Tensor y0 = F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 0.0);
      CHECK(values(y0.select(1, 0)) == Vec(36, 0.0));
    }
  }
}

// Far from 0 the normalised value is (x - mean) * a + b, not x * a + (b - mean * a), whose two large
// products cancel and leave their rounding, ulp(|mean| / std): with mean / std = 1e4 about 7e-4, at
// 1e6 about 0.03. Against double math from the f32 statistics (momentum 1 copies them out).
TEST_CASE("norm: f32 batch_norm far from 0 keeps the precision of x - mean, with and without the ReLU") {
  Generator g(4);
  for (const auto& [centre, spread] : {std::pair{1000.0, 0.1}, std::pair{1e4, 0.01}}) {
    CAPTURE(centre);
    const Tensor x = (uniform({64, 2, 4, 4}, g, -1.7, 1.7, kF64) * spread + centre).to(kF32);
    const Vec xv = values(x), w{1.0, 0.5}, b{0.0, 1.0};
    for (bool relu : {false, true}) {
      CAPTURE(relu);
      Tensor rm = zeros({2}), rv = ones({2});
      const Tensor wt = from_vector<float>({1.0f, 0.5f}), bt = from_vector<float>({0.0f, 1.0f});
      const Tensor y = relu ? F::batch_norm_relu(x, rm, rv, wt, bt, true, 1.0)
                            : F::batch_norm(x, rm, rv, wt, bt, true, 1.0);
      const Vec mean = values(rm), var_unbiased = values(rv);
      const double n = 64 * 16;
      Vec want;
      for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = i / 16 % 2;
        const double v = (xv[i] - mean[c]) / std::sqrt(var_unbiased[c] * (n - 1) / n + 1e-5) * w[c] + b[c];
        want.push_back(relu ? std::max(v, 0.0) : v);
      }
      check_close(y, want, {.rtol = 1e-5, .atol = 1e-5});
    }
  }
}

TEST_CASE("norm: batch_norm running statistics after two steps, then eval uses them") {
  Tensor rm = zeros({2}), rv = ones({2});
  // Step 1: channel 0 {1, 3} (mean 2, unbiased var 2), channel 1 {2, 6} (mean 4, unbiased var 8).
  F::batch_norm(from_vector<float>({1, 2, 3, 6}, {2, 2}), rm, rv, Tensor(), Tensor(), true, 0.1);
  check_close(rm, {0.2, 0.4}, {.rtol = 1e-6, .atol = 1e-8});
  check_close(rv, {1.1, 1.7}, {.rtol = 1e-6, .atol = 1e-8});
  // Step 2: channel 0 {0, 2, 4} (mean 2, var 4), channel 1 {1, 3, 5} (mean 3, var 4).
  F::batch_norm(from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2}), rm, rv, Tensor(), Tensor(), true, 0.1);
  check_close(rm, {0.38, 0.66}, {.rtol = 1e-6, .atol = 1e-8});
  check_close(rv, {1.39, 1.93}, {.rtol = 1e-6, .atol = 1e-8});
  CHECK(rm.version() > 0);

  // Eval: the running statistics, no update.
  Tensor x = from_vector<float>({1, -1, 0.5, 2, 3, 0}, {3, 2});
  Tensor w = from_vector<float>({2, 0.5}), b = from_vector<float>({0.1, -0.2});
  Tensor y = F::batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
  Vec m{0.38, 0.66}, v{1.39, 1.93};
  check_close(y, ref_batch_norm(values(x), 3, 2, 1, {2, 0.5}, {0.1, -0.2}, 1e-5, &m, &v), {.rtol = 1e-6, .atol = 1e-8});
  check_close(rm, {0.38, 0.66}, {.rtol = 1e-6, .atol = 1e-8});

  // Spatial input and f64 running stats for an f32 input: momentum 0.5, stats over N*H*W.
  Generator g(3);
  Tensor x4 = uniform({2, 3, 2, 2}, g, -1, 1, kF32);
  Tensor rm4 = full({3}, 1.0, kF64), rv4 = full({3}, 2.0, kF64);
  F::batch_norm(x4, rm4, rv4, Tensor(), Tensor(), true, 0.5);
  Vec xv = values(x4);
  for (int64_t c = 0; c < 3; ++c) {
    double m = 0, q = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t s = 0; s < 4; ++s) m += xv[(n * 3 + c) * 4 + s];
    m /= 8;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t s = 0; s < 4; ++s) q += std::pow(xv[(n * 3 + c) * 4 + s] - m, 2);
    CHECK(values(rm4)[c] == doctest::Approx(0.5 * 1.0 + 0.5 * m).epsilon(1e-6));
    CHECK(values(rv4)[c] == doctest::Approx(0.5 * 2.0 + 0.5 * q / 7).epsilon(1e-6));
  }
}

TEST_CASE("norm: batch_norm f16/bf16 compute in float and return the input dtype") {
  Generator g(4);
  for (DType t : {kF16, kBF16}) {
    Tensor x = uniform({6, 4, 3, 3}, g, -3.0, 3.0, t);
    Tensor w = uniform({4}, g, 0.5, 1.5, kF32), b = uniform({4}, g, -1.0, 1.0, kF32);
    Tensor rm = zeros({4}), rv = ones({4});
    Tensor y = F::batch_norm(x, rm, rv, w, b, true);
    CHECK(y.dtype() == t);
    check_close(y, ref_batch_norm(values(x), 6, 4, 9, values(w), values(b), 1e-5),
                t == kF16 ? Tol{2e-3, 2e-5} : Tol{1e-2, 1e-4});
    Tensor xg = x.to(kF32).requires_grad_();
    Tensor xh = x.clone().requires_grad_();
    sum(F::batch_norm(xh, Tensor(), Tensor(), w, b, true) * arange(double(x.numel())).reshape(x.shape()).to(t))
        .backward();
    sum(F::batch_norm(xg, Tensor(), Tensor(), w, b, true) * arange(double(x.numel())).reshape(x.shape())).backward();
    CHECK(xh.grad().dtype() == t);
    check_close(xh.grad(), xg.grad(), t == kF16 ? Tol{1e-2, 1e-4} : Tol{5e-2, 5e-4});
  }
}

TEST_CASE("norm: batch_norm and group_norm give the same bits on 1 and 2 threads") {
  Generator g(5);
  Tensor x = uniform({16, 8, 24, 24}, g, -1, 1, kF32);
  Tensor w = uniform({8}, g, 0.5, 1.5, kF32), b = uniform({8}, g, -1, 1, kF32);
  auto run = [&] {
    Tensor xl = x.clone().requires_grad_(), wl = w.clone().requires_grad_();
    Tensor y = F::batch_norm(xl, Tensor(), Tensor(), wl, b, true);
    Tensor z = F::group_norm(xl, 4, wl, b);
    Tensor l = F::layer_norm(xl, {24, 24}, Tensor(), Tensor());
    sum(y * y + z * l).backward();
    return std::vector<Vec>{values(y), values(z), values(l), values(xl.grad()), values(wl.grad())};
  };
  const int threads = get_num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(std::max(threads, 2));
  auto two = run();
  set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
  // And the large case still matches the reference.
  check_close(one[0], ref_batch_norm(values(x), 16, 8, 576, values(w), values(b), 1e-5), {.rtol = 1e-5, .atol = 1e-7});
  check_close(one[1], ref_group_norm(values(x), 16, 8, 576, 4, values(w), values(b), 1e-5),
              {.rtol = 1e-5, .atol = 1e-7});
}

// f32 batch norm, forward and every gradient, NCHW and channels-last, with the ReLU folded in or
// not: within a few ulp of f64's results, and the same bits on 1 and 2 threads.
TEST_CASE("norm: f32 batch_norm and batch_norm_relu match f64 in both layouts, and on 1 and 2 threads") {
  Generator g(7);
  const Tensor x0 = uniform({16, 8, 12, 12}, g, -1, 3, kF32), gy = uniform({16, 8, 12, 12}, g, -1, 1, kF32);
  const Tensor w0 = uniform({8}, g, 0.5, 1.5, kF32), b0 = uniform({8}, g, -1, 1, kF32);
  auto run = [&](DType t, MemoryFormat format, bool relu) {
    // Fresh leaves each run (x0.to(kF32) is x0 itself, whose gradient would accumulate).
    Tensor x = x0.to(t).clone().contiguous(format).requires_grad_(), w = w0.to(t).clone().requires_grad_(),
           b = b0.to(t).clone().requires_grad_();
    Tensor rm = zeros({8}, t), rv = ones({8}, t);
    Tensor y = (relu ? F::batch_norm_relu : F::batch_norm)(x, rm, rv, w, b, true, 0.1, 1e-5);
    y.backward(gy.to(t));
    return V{y.detach(), x.grad(), w.grad(), b.grad(), rm, rv};
  };
  const int threads = get_num_threads();
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast})
    for (bool relu : {false, true}) {
      const V ref = run(kF64, format, relu);
      set_num_threads(1);
      const V one = run(kF32, format, relu);
      set_num_threads(std::max(threads, 2));
      const V two = run(kF32, format, relu);
      set_num_threads(threads);
      const std::string what = std::string(relu ? "relu" : "plain") +
                               (format == MemoryFormat::ChannelsLast ? " channels-last" : "");
      for (size_t i = 0; i < one.size(); ++i) {
        check_close(two[i], one[i], kExact, what + " 1 vs 2 threads, result " + std::to_string(i));
        check_close(one[i], ref[i], {.rtol = 2e-5, .atol = 2e-5}, what + " vs f64, result " + std::to_string(i));
      }
    }
}

// batch_norm in f64: train and eval, with and without affine, strided input.
const test::GradcheckCases kBatchNormGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(6);
  V in{leaf_of(uniform({3, 4, 5}, g)), leaf_of(uniform({4}, g, 0.5, 1.5)), leaf_of(uniform({4}, g))};
  t.push_back({"batch_norm", "training, affine, a double-transposed view", in, [](const V& v) {
                 Tensor rm = zeros({4}, kF64), rv = ones({4}, kF64);
                 return F::batch_norm(v[0].transpose(0, 2).transpose(0, 2), rm, rv, v[1], v[2], true);
               }});
  t.push_back({"batch_norm", "eval with running statistics, affine", in, [](const V& v) {
                 Tensor rm = full({4}, 0.3, kF64), rv = full({4}, 1.7, kF64);
                 return F::batch_norm(v[0], rm, rv, v[1], v[2], false);
               }});
  V in2{leaf_of(uniform({6, 3}, g))};
  t.push_back({"batch_norm", "training, (N, C), no statistics, no affine", in2,
               [](const V& v) { return F::batch_norm(v[0].t().t(), Tensor(), Tensor(), Tensor(), Tensor(), true); }});
  V in3{uniform({5, 2, 3}, g), leaf_of(uniform({2}, g))};
  t.push_back({"batch_norm", "only the weight needs a gradient", in3,
               [](const V& v) { return F::batch_norm(v[0], Tensor(), Tensor(), v[1], Tensor(), true); }});
});

// ---- layer norm and group norm -----------------------------------------------------------------

TEST_CASE("norm: layer_norm over the last 1 and 2 dims, strided, f32/f64/f16/bf16") {
  Generator g(7);
  for (DType t : {kF64, kF32, kF16, kBF16}) {
    const Tol tol = t == kF64   ? Tol{1e-12, 1e-14}
                    : t == kF32 ? Tol{1e-5, 1e-7}
                    : t == kF16 ? Tol{3e-3, 3e-5}
                                : Tol{2e-2, 2e-4};
    Tensor x = swapped(uniform({5, 3, 4, 6}, g, -2, 2, t));
    Tensor w1 = uniform({6}, g, 0.5, 1.5, t), b1 = uniform({6}, g, -1, 1, t);
    Tensor y1 = F::layer_norm(x, {6}, w1, b1);
    CHECK(y1.dtype() == t);
    check_close(y1, ref_group_norm(values(x), 60, 6, 1, 1, values(w1), values(b1), 1e-5), tol);
    Tensor w2 = uniform({4, 6}, g, 0.5, 1.5, t);
    Tensor y2 = F::layer_norm(x, {4, 6}, w2, Tensor(), 1e-3);
    check_close(y2, ref_group_norm(values(x), 15, 24, 1, 1, values(w2), {}, 1e-3), tol);
    Tensor y3 = F::layer_norm(x, {3, 4, 6});
    check_close(y3, ref_group_norm(values(x), 5, 72, 1, 1, {}, {}, 1e-5), tol);
  }
  // A 1-D input, zero-size leading dims.
  Tensor v = from_vector<double>({1, 2, 3, 4});
  check_close(F::layer_norm(v, {4}), ref_group_norm({1, 2, 3, 4}, 1, 4, 1, 1, {}, {}, 1e-5),
              {.rtol = 1e-12, .atol = 1e-14});
  CHECK(F::layer_norm(zeros({0, 3}), {3}).shape() == Shape{0, 3});
}

TEST_CASE("norm: group_norm forward, strided and in half precision") {
  Generator g(8);
  for (DType t : {kF64, kF32, kF16}) {
    const Tol tol = t == kF64 ? Tol{1e-12, 1e-14} : t == kF32 ? Tol{1e-5, 1e-7} : Tol{3e-3, 3e-5};
    Tensor x = swapped(uniform({3, 6, 4, 5}, g, -2, 2, t));
    Tensor w = uniform({6}, g, 0.5, 1.5, t), b = uniform({6}, g, -1, 1, t);
    for (int64_t G : {1, 2, 3, 6}) {
      Tensor y = F::group_norm(x, G, w, b);
      CHECK(y.dtype() == t);
      check_close(y, ref_group_norm(values(x), 3, 6, 20, G, values(w), values(b), 1e-5), tol);
    }
    Tensor y2 = F::group_norm(x.reshape({3, 6, 20}).select(2, 0), 3);  // (N, C) input
    check_close(y2, ref_group_norm(values(x.reshape({3, 6, 20}).select(2, 0)), 3, 6, 1, 3, {}, {}, 1e-5), tol);
  }
}

// layer_norm and group_norm in f64.
const test::GradcheckCases kLayerGroupNormGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(9);
  V in{leaf_of(uniform({4, 3, 5}, g)), leaf_of(uniform({5}, g, 0.5, 1.5)), leaf_of(uniform({5}, g))};
  t.push_back({"layer_norm", "last dim of a transposed input, affine", in,
               [](const V& v) { return F::layer_norm(v[0].transpose(0, 1), {5}, v[1], v[2]); }});
  V in2{leaf_of(uniform({4, 3, 5}, g)), leaf_of(uniform({3, 5}, g, 0.5, 1.5))};
  t.push_back({"layer_norm", "last 2 dims, weight only, eps 1e-3", in2, [](const V& v) {
                 return F::layer_norm(v[0], {3, 5}, v[1], Tensor(), 1e-3);
               }});
  V in3{leaf_of(uniform({3, 7}, g))};
  t.push_back({"layer_norm", "transposed, no affine", in3, [](const V& v) { return F::layer_norm(v[0].t(), {3}); }});

  V gin{leaf_of(uniform({3, 6, 2, 2}, g)), leaf_of(uniform({6}, g, 0.5, 1.5)), leaf_of(uniform({6}, g))};
  t.push_back({"group_norm", "3 groups, transposed H/W, affine", gin,
               [](const V& v) { return F::group_norm(v[0].transpose(2, 3), 3, v[1], v[2]); }});
  t.push_back({"group_norm", "1 group, affine", gin, [](const V& v) { return F::group_norm(v[0], 1, v[1], v[2]); }});
  V gin2{leaf_of(uniform({4, 6}, g)), leaf_of(uniform({6}, g))};
  t.push_back(
      {"group_norm", "(N, C), bias only", gin2, [](const V& v) { return F::group_norm(v[0], 2, Tensor(), v[1]); }});
});

// Far from 0: group norm normalises (x - mean) rather than adding x * a to b - mean * a, two large
// products whose difference loses the deviation's bits: groups (1e7, 1e7 + 2) and (5e6 + 0.5,
// 5e6 + 1.5) came out as -1 and 1 (-0.999995 and -0.99998 are right), and -1.068 and -1.272 where
// the GPU fused the multiply and the add.
TEST_CASE("norm: group_norm and layer_norm keep a row's deviations far from 0, f32 against f64") {
  const Tensor x = from_vector<float>({1e7f, 1e7f + 2, 5e6f + 0.5f, 5e6f + 1.5f}, {1, 4});
  const Tensor x4 = from_vector<float>({1e7f, 1e7f + 2, 1e7f + 4, 1e7f + 6}, {1, 4});
  const std::pair<Tensor, Tensor> cases[] = {{F::group_norm(x, 2), F::group_norm(x.to(kF64), 2)},
                                             {F::layer_norm(x4, {4}), F::layer_norm(x4.to(kF64), {4})}};
  for (const auto& [got, want] : cases) check_close(got, want.to(kF32), same_tol(1e-6), "deviations far from 0");
}

// bf16 has f32's range: squared deviations past 3.4e38 overflow a float block sum, which is then
// summed again in double, so the variance of finite values is finite (here about 6.2e36).
TEST_CASE("norm: bf16 batch_norm statistics keep bf16's range") {
  std::vector<float> v(2 * 8 * 32, 0.0f);
  for (int64_t c = 0; c < 8; ++c) v[size_t((8 + c) * 32 + 5)] = 2e19f;
  const Tensor x = from_vector<float>(v, {2, 8, 32}).to(kBF16);
  Tensor rm = zeros({8}), rv = ones({8});
  const Tensor y = F::batch_norm(x, rm, rv, Tensor(), Tensor(), true, 1.0, 1e-5);
  // One value x = 2e19 in 64: the biased variance x^2 * 63 / 4096; the running one (momentum 1)
  // unbiased, x^2 / 64 = 6.25e36 (bf16 rounds x by under 0.4%).
  for (float r : rv.to_vector<float>()) CHECK(r == doctest::Approx(6.25e36).epsilon(1e-2));
  const std::vector<float> yv = y.to(kF32).to_vector<float>();
  CHECK(std::all_of(yv.begin(), yv.end(), [](float e) { return std::isfinite(e); }));
  CHECK(yv[size_t(8 * 32 + 5)] == doctest::Approx(std::sqrt(63.0)).epsilon(1e-2));  // the outlier, normalised
}

// Squared deviations past 3.4e38 overflow a float block sum of the layer norm's rows, which is then
// summed again in double: the variance, 1.25e40, is finite in double and its inverse root in f32.
// The input gradient's terms, about 1e-21, must not pass through the square of that root (1e-40).
TEST_CASE("norm: f32 layer_norm and group_norm of values near 1e20 normalise them, forward and backward") {
  const bool was_wide = toggles::wide_layer_norm();
  const Tensor x = from_vector<float>({1e20f, -1e20f, 2e20f, 0.f}, {1, 4});
  const Tensor gy = from_vector<float>({1.f, 2.f, -1.f, 0.5f}, {1, 4});
  const double s = std::sqrt(1.25e40);  // deviations 5e19, -1.5e20, 1.5e20, -5e19 from the mean 5e19
  const Vec xhat{5e19 / s, -1.5e20 / s, 1.5e20 / s, -5e19 / s}, g{1, 2, -1, 0.5};
  Vec want_grad;  // (g - mean(g) - xhat * mean(g * xhat)) / std
  const double mg = (g[0] + g[1] + g[2] + g[3]) / 4,
               mgx = (g[0] * xhat[0] + g[1] * xhat[1] + g[2] * xhat[2] + g[3] * xhat[3]) / 4;
  for (size_t i = 0; i < 4; ++i) want_grad.push_back((g[i] - mg - xhat[i] * mgx) / s);
  for (bool wide : {false, true}) {
    CAPTURE(wide);
    toggles::set_wide_layer_norm(wide);
    Tensor xl = x.clone().requires_grad_(), w = ones({4}).requires_grad_(), b = zeros({4}).requires_grad_();
    const Tensor y = F::layer_norm(xl, {4}, w, b);
    check_close(y, xhat, {.rtol = 1e-5, .atol = 1e-6});
    for (const Shape& shape :
         {Shape{1, 4, 1}, Shape{1, 1, 4}}) {  // group norm: one group of 4 channels, or of 4 values
      CAPTURE(shape_str(shape));
      Tensor xg = x.reshape(shape).clone().requires_grad_();
      const Tensor yg = F::group_norm(xg, 1);
      check_close(yg.reshape({1, 4}), xhat, {.rtol = 1e-5, .atol = 1e-6});
      yg.backward(gy.reshape(shape));
      check_close(xg.grad().reshape({1, 4}), want_grad, {.rtol = 1e-5, .atol = 1e-27});
    }
    y.backward(gy);
    check_close(xl.grad(), want_grad, {.rtol = 1e-5, .atol = 1e-27});
    check_close(w.grad(), {xhat[0], 2 * xhat[1], -xhat[2], 0.5 * xhat[3]}, {.rtol = 1e-5, .atol = 1e-6});
  }
  toggles::set_wide_layer_norm(was_wide);
}

// layer_norm over the last dim of random inputs of shape s, forward and backward in dtype t:
// {y, x.grad, w.grad, b.grad}, the same values whatever t.
struct LayerNormInputs {
  Tensor x, w, b, gy;
  LayerNormInputs(const Shape& s, Generator& g)
      : x(uniform(s, g, -3, 2)), w(uniform({s.back()}, g, 0.5, 1.5)), b(uniform({s.back()}, g)), gy(uniform(s, g)) {}
  std::vector<Vec> run(DType t) const {
    Tensor xt = x.to(t).detach().requires_grad_(), wt = w.to(t).detach().requires_grad_(),
           bt = b.to(t).detach().requires_grad_();
    Tensor y = F::layer_norm(xt, {x.size(-1)}, wt, bt);
    y.backward(gy.to(t));
    return {values(y), values(xt.grad()), values(wt.grad()), values(bt.grad())};
  }
};

// The f32 layer norm runs its own vectorised rows (float partial sums in double): its forward and
// all three gradients against the same computation in f64, on rows long and short, odd widths.
TEST_CASE("norm: layer_norm f32 forward and backward match f64") {
  Generator g(10);
  for (const Shape& s : {Shape{37, 384}, Shape{5, 3}, Shape{9, 131}, Shape{2, 3, 1000}}) {
    CAPTURE(shape_str(s));
    const LayerNormInputs in(s, g);
    const std::vector<Vec> want = in.run(kF64), got = in.run(kF32);
    check_close(got[0], want[0], {.rtol = 2e-6, .atol = 5e-7});  // normalised values round like order-one ones
    // The gradients sum order-one terms that cancel: their f32 error is absolute, about 5e-7.
    check_close(got[1], want[1], {.rtol = 2e-5, .atol = 2e-6});
    check_close(got[2], want[2], {.rtol = 2e-5, .atol = 2e-6});
    check_close(got[3], want[3], {.rtol = 2e-5, .atol = 2e-6});
  }
}

// The f32 parameter gradients are summed over blocks of rows (at least 64, at most 256 blocks):
// many blocks, a partial last one and blocks longer than 64 rows, against f64 and on 1 and 2 threads.
TEST_CASE(
    "norm: layer_norm's f32 parameter gradients over many row blocks match f64, the same bits on 1 and 2 threads") {
  Generator g(12);
  for (const Shape& s : {Shape{200, 48}, Shape{3, 7, 65}, Shape{20000, 8}}) {
    CAPTURE(shape_str(s));
    const LayerNormInputs in(s, g);
    const int threads = get_num_threads();
    set_num_threads(1);
    const std::vector<Vec> one = in.run(kF32);
    set_num_threads(std::max(threads, 2));
    const std::vector<Vec> two = in.run(kF32), want = in.run(kF64);
    set_num_threads(threads);
    for (size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
    // Sums over up to 20000 rows of order-one terms: absolute f32 error grows with the row count.
    const double atol = 2e-6 * std::sqrt(double(s[0] * (s.size() > 2 ? s[1] : 1)));
    check_close(two[1], want[1], {.rtol = 2e-5, .atol = 2e-6});
    check_close(two[2], want[2], {.rtol = 2e-5, .atol = atol});
    check_close(two[3], want[3], {.rtol = 2e-5, .atol = atol});
  }
}

TEST_CASE("norm: layer_norm with fused_layer_norm off (composed of ops) matches the fused kernels, and gradchecks") {
  const bool was = toggles::fused_layer_norm();
  Generator g(11);
  for (DType t : {kF64, kF32})
    for (const Shape& ns : {Shape{131}, Shape{3, 7}}) {
      CAPTURE(t);
      CAPTURE(shape_str(ns));
      Shape s = {9};
      s.insert(s.end(), ns.begin(), ns.end());
      const Tensor x0 = uniform(s, g, -3, 2).to(t), w0 = uniform(ns, g, 0.5, 1.5).to(t), b0 = uniform(ns, g).to(t);
      const Tensor gy = uniform(s, g).to(t);
      std::vector<Vec> got[2];
      for (bool fused : {false, true}) {
        toggles::set_fused_layer_norm(fused);
        Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_(), b = b0.detach().requires_grad_();
        Tensor y = F::layer_norm(x, ns, w, b);
        y.backward(gy);
        CHECK(y.dtype() == t);
        got[fused] = {values(y), values(x.grad()), values(w.grad()), values(b.grad())};
      }
      const Tol tol = t == kF64 ? Tol{1e-10, 1e-12} : Tol{2e-5, 2e-6};
      for (size_t i = 0; i < 4; ++i) check_close(got[0][i], got[1][i], tol);
      if (t == kF32) CHECK(got[0][1] != got[1][1]);  // different code: the gradients differ in rounding
      if (t == kF64) {
        toggles::set_fused_layer_norm(false);
        const auto r = autograd::gradcheck(
            [&](const V& v) { return F::layer_norm(v[0], ns, v[1], v[2]); },
            {x0.detach().requires_grad_(), w0.detach().requires_grad_(), b0.detach().requires_grad_()});
        CHECK_MESSAGE(r.ok, r.report);
        const auto bare = autograd::gradcheck([&](const V& v) { return F::layer_norm(v[0], ns); },
                                              {x0.detach().requires_grad_()});  // no weight, no bias
        CHECK_MESSAGE(bare.ok, bare.report);
      }
    }
  toggles::set_fused_layer_norm(was);
  CHECK(toggles::fused_layer_norm());
}

TEST_CASE("norm: normalisation errors name the op and the shapes") {
  Tensor x = zeros({4, 3, 2});
  CHECK_THROWS_WITH_AS(F::batch_norm(zeros({3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm: expected an input of shape (N, C) or (N, C, ...), got [3]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(x, Tensor(), Tensor(), zeros({4}), Tensor(), true),
                       doctest::Contains("batch_norm: weight of shape [4] does not match the expected [3] for the "
                                         "input of shape [4,3,2]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(x, zeros({3}), ones({2}), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm: running_var of shape [2] does not match"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false),
                       doctest::Contains("batch_norm: running_mean and running_var are required in eval mode"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm: expected more than 1 value per channel when training, got input "
                                         "of shape [1,3]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::batch_norm(zeros({2, 3}, kI64), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm: expected a floating input (f32, f16, bf16, f64), got i64"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {3}),
                       doctest::Contains("layer_norm: normalized_shape [3] does not match the trailing dims of the "
                                         "input of shape [4,3,2]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {5, 4, 3, 2}), doctest::Contains("layer_norm: normalized_shape [5,4,3,2]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {}),
                       doctest::Contains("layer_norm: normalized_shape must have at least one dim"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {3, 2}, zeros({6})),
                       doctest::Contains("layer_norm: weight of shape [6] does not match the expected [3,2]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::layer_norm(x, {2}, Tensor(), zeros({2}, kI32)),
                       doctest::Contains("layer_norm: bias must be floating, got i32"), mdl::Error);
  CHECK_THROWS_WITH_AS(
      F::group_norm(x, 2),
      doctest::Contains("group_norm: 3 channels (input of shape [4,3,2]) cannot be split into 2 groups"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::group_norm(x, 0), doctest::Contains("cannot be split into 0 groups"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::group_norm(zeros({3}), 1),
                       doctest::Contains("group_norm: expected an input of shape (N, C, ...), got [3]"), mdl::Error);
}

// ---- dropout -----------------------------------------------------------------------------------

TEST_CASE("norm: dropout zeroes a fraction p and scales the rest by 1/(1-p)") {
  Generator g(11);
  Tensor x = uniform({100, 1000}, g, 1.0, 2.0, kF32);
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    Tensor y = F::dropout(x, p, true, &g);
    CHECK(y.dtype() == kF32);
    std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
    int64_t zeros_n = 0;
    const float scale = float(1.0 / (1.0 - p));
    for (size_t i = 0; i < yv.size(); ++i) {
      if (yv[i] == 0.0f) ++zeros_n;
      else if (std::abs(yv[i] - xv[i] * scale) > 1e-6f * std::abs(yv[i])) FAIL_CHECK("element ", i, " not scaled");
    }
    CHECK(std::abs(double(zeros_n) / double(yv.size()) - p) < 0.01);
  }
  // Identity when not training or p == 0; zeros (and zero gradient) for p == 1.
  CHECK(F::dropout(x, 0.5, false).is_same(x));
  CHECK(F::dropout(x, 0.0, true).is_same(x));
  Tensor xl = x.clone().requires_grad_();
  Tensor y1 = F::dropout(xl, 1.0, true, &g);
  for (float v : y1.to_vector<float>()) REQUIRE(v == 0.0f);
  sum(y1).backward();
  for (float v : xl.grad().to_vector<float>()) REQUIRE(v == 0.0f);
  // f16 and strided inputs keep their dtype and shape.
  Tensor h = x.to(kF16).t();
  Tensor yh = F::dropout(h, 0.25, true, &g);
  CHECK(yh.dtype() == kF16);
  CHECK(yh.shape() == Shape{1000, 100});
  std::vector<double> hv = values(h), yhv = values(yh);
  for (size_t i = 0; i < hv.size(); ++i)
    if (yhv[i] != 0) REQUIRE(std::abs(yhv[i] - hv[i] / 0.75) <= 2e-3 * hv[i]);
}

TEST_CASE("norm: dropout's mask depends on (seed, offset) only") {
  Tensor x = ones({37, 29});
  Generator a(42), b(42);
  Tensor ya = F::dropout(x, 0.4, true, &a), yb = F::dropout(x, 0.4, true, &b);
  CHECK(values(ya) == values(yb));
  CHECK(a.offset() == uint64_t((37 * 29 + 3) / 4));
  CHECK(values(F::dropout(x, 0.4, true, &a)) != values(ya));  // the next call draws fresh counters
  // The documented draw: element i keeps when Philox(seed, offset + i/4) word i%4 >= p * 2^32.
  Generator c(7);
  c.set_offset(1000);
  Vec y = values(F::dropout(x, 0.4, true, &c));
  for (size_t i = 0; i < y.size(); ++i) {
    auto r = Generator::philox(7, 1000 + i / 4);
    const bool keep = double(r[i % 4]) >= 0.4 * 4294967296.0;
    REQUIRE((y[i] != 0) == keep);
  }
  // Thread count does not matter.
  Tensor big = ones({300, 1000});
  const int threads = get_num_threads();
  set_num_threads(1);
  Generator d1(9);
  Vec one = values(F::dropout(big, 0.5, true, &d1));
  set_num_threads(std::max(threads, 2));
  Generator d2(9);
  Vec two = values(F::dropout(big, 0.5, true, &d2));
  set_num_threads(threads);
  CHECK(one == two);
  // The default generator follows manual_seed.
  manual_seed(123);
  Vec m1 = values(F::dropout(x, 0.5));
  manual_seed(123);
  CHECK(values(F::dropout(x, 0.5)) == m1);
}

const test::GradcheckCases kDropoutGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(12);
  t.push_back(
      {"dropout", "p 0.35, transposed, a fixed generator per call", {leaf_of(uniform({6, 7}, g))}, [](const V& v) {
         Generator local(77);
         return F::dropout(v[0].t(), 0.35, true, &local);
       }});
});

TEST_CASE("norm: dropout rejects a probability outside [0, 1] and integer inputs") {
  CHECK_THROWS_WITH_AS(F::dropout(ones({3}), 1.5), doctest::Contains("dropout: probability must be in [0, 1], got 1.5"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::dropout(ones({3}), -0.1),
                       doctest::Contains("dropout: probability must be in [0, 1], got -0.1"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::dropout(ones({3}), std::nan("")), doctest::Contains("dropout: probability must be in [0, 1]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::dropout(ones({3}, kI64), 0.5),
                       doctest::Contains("dropout: expected a floating input (f32, f16, bf16, f64), got i64"),
                       mdl::Error);
}

// ---- embedding ---------------------------------------------------------------------------------

TEST_CASE("norm: embedding looks up rows for an index of any shape, repeated indices accumulate") {
  Generator g(13);
  Tensor w = uniform({5, 3}, g, -1, 1, kF32).requires_grad_();
  Tensor idx = from_vector<int64_t>({0, 2, 0, 4, 2, 2}, {2, 3});
  Tensor y = F::embedding(idx, w);
  CHECK(y.shape() == Shape{2, 3, 3});
  CHECK(y.dtype() == kF32);
  Vec wv = values(w), yv = values(y);
  const int64_t ids[] = {0, 2, 0, 4, 2, 2};
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t d = 0; d < 3; ++d) CHECK(yv[size_t(i * 3 + d)] == wv[size_t(ids[i] * 3 + d)]);
  Tensor r = arange(18.0).reshape({2, 3, 3});
  sum(y * r).backward();
  Vec want(15, 0.0), rv = values(r);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t d = 0; d < 3; ++d) want[size_t(ids[i] * 3 + d)] += rv[size_t(i * 3 + d)];
  CHECK(values(w.grad()) == want);
  // I32 and 0-dim indices, a transposed weight.
  Tensor wt = uniform({3, 5}, g, -1, 1, kF32).t();
  CHECK(F::embedding(scalar_tensor(3, kI32), wt).shape() == Shape{3});
  CHECK(values(F::embedding(scalar_tensor(3, kI32), wt)) == values(wt.select(0, 3)));
  CHECK(F::embedding(zeros({0, 2}, kI64), wt).shape() == Shape{0, 2, 3});
}

const test::GradcheckCases kEmbeddingGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(14);
  t.push_back({"embedding", "repeated rows, a double-transposed weight", {leaf_of(uniform({4, 3}, g))}, [](const V& v) {
                 return F::embedding(from_vector<int64_t>({3, 1, 3, 0, 3, 2}, {3, 2}), v[0].t().t());
               }});
});

TEST_CASE("norm: embedding errors name the index, its range and the shapes") {
  Tensor w = zeros({5, 3});
  CHECK_THROWS_WITH_AS(
      F::embedding(from_vector<int64_t>({1, 5}), w),
      doctest::Contains("embedding: index 5 is out of range for a weight of shape [5,3] (5 embeddings)"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::embedding(from_vector<int64_t>({-1}), w),
                       doctest::Contains("embedding: index -1 is out of range"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::embedding(zeros({2}), w),
                       doctest::Contains("embedding: index must be an integer tensor (I64, I32 or U8), got f32"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(
      F::embedding(zeros({2}, kI64), zeros({5})),
      doctest::Contains("embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape [5]"), mdl::Error);
}

TEST_CASE("norm: BatchNorm2d counts its training batches in num_batches_tracked, not its eval ones") {
  nn::BatchNorm2d bn(3);
  const Tensor x = sample({4, 3, 2, 2}, kF32, 5);
  const uint64_t version = bn.num_batches_tracked.version();
  for (int i = 0; i < 3; ++i) bn(x);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 3);
  CHECK(bn.num_batches_tracked.version() > version);  // written in place, as add_ would
  bn.eval();
  bn(x);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 3);
}

TEST_CASE("cuda: BatchNorm2d counts its training batches on the GPU" * MDL_CUDA_ONLY) {
  nn::BatchNorm2d bn(3);
  bn.to(Device::cuda());
  const Tensor x = sample({4, 3, 2, 2}, kF32, 5).to(Device::cuda());
  for (int i = 0; i < 3; ++i) bn(x);
  CHECK(bn.num_batches_tracked.device().is_cuda());
  CHECK(bn.num_batches_tracked.item<int64_t>() == 3);
}
