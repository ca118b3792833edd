// Fused scaled_dot_product_attention: the forward against a plain double loop (no mask, causal
// with L == S and L != S, padding and full masks, both, many leading dims, transposed views,
// Ev != E, custom scale, several query blocks, f64/f16/bf16), the backward by gradcheck in f64
// and against the composed ops, fully-masked rows (zeros, not NaN), a NaN query, scores far apart
// (the softmax's max over every key, on 16 lanes and 8), zero sizes, and the errors; and the same call with the fused_attention switch off (composed of ops inside the library).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "ops/gradcheck.h"
#include "autograd/node.h"
#include "mdl.h"
#include "switches/list/toggles.h"
#include "nn/functional.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;
using V = std::vector<double>;

namespace {


// The elements of t in row-major order of its shape, read through its strides.
Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }
Shape cat_shape(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// softmax(mask(q k^T * scale)) v in double, one output row at a time; a row with no visible key is 0.
V reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = Tensor(), bool causal = false,
            std::optional<double> scale = std::nullopt) {
  const int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  const Shape batch = broadcast_shapes(broadcast_shapes(batch_of(q), batch_of(k), "ref"), batch_of(v), "ref");
  const V qv = values(q.expand(cat_shape(batch, {L, E}))), kv = values(k.expand(cat_shape(batch, {S, E})));
  const V vv = values(v.expand(cat_shape(batch, {S, Ev})));
  const V mv = mask.defined() ? values(mask.expand(cat_shape(batch, {L, S}))) : V();
  const double sc = scale ? *scale : 1.0 / std::sqrt(double(E));
  const int64_t N = shape_numel(batch);
  V out(size_t(N * L * Ev), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < L; ++i) {
      V s(size_t(S), 0.0);
      std::vector<bool> vis(static_cast<size_t>(S));
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        vis[size_t(j)] = (!causal || j <= i) && (mv.empty() || mv[size_t((n * L + i) * S + j)] != 0.0);
        for (int64_t e = 0; e < E; ++e)
          s[size_t(j)] += qv[size_t((n * L + i) * E + e)] * kv[size_t((n * S + j) * E + e)];
        s[size_t(j)] *= sc;
        if (vis[size_t(j)]) mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < S; ++j) sum += vis[size_t(j)] ? std::exp(s[size_t(j)] - mx) : 0.0;
      for (int64_t j = 0; j < S; ++j) {
        if (!vis[size_t(j)]) continue;
        const double p = std::exp(s[size_t(j)] - mx) / sum;
        for (int64_t e = 0; e < Ev; ++e) out[size_t((n * L + i) * Ev + e)] += p * vv[size_t((n * S + j) * Ev + e)];
      }
    }
  return out;
}

Tensor randn_t(const Shape& s, DType t, Generator& g) { return randn(s, kF64, &g).to(t); }
// Bool from 0/1 values.
Tensor bool_mask(const std::vector<int64_t>& v, const Shape& s) { return from_vector(v, s).to(kBool); }
// (B, L, H, D) -> (B, H, L, D), as MultiheadAttention hands its heads over.
Tensor heads(const Tensor& x) { return transpose(x, 1, 2); }

// The same attention composed from differentiable ops (NaN on fully masked rows, as PyTorch).
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor s = matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  Tensor hidden = zeros({L, S}, kF64);
  if (causal) hidden = triu(ones({L, S}, kF64), 1);
  if (mask.defined()) hidden = hidden + (1.0 - mask.to(kF64));
  s = masked_fill(s, gt(hidden, scalar_tensor(0.5, kF64)), -std::numeric_limits<double>::infinity());
  return matmul(softmax(s, -1), v);
}

// Shapes for the tests on each GEMM kernel: queries past a tile's edge, keys and head dims past the
// kernels' k blocks, L != S, masks and causal, a single matrix (its tiles split across threads).
struct EdgeCase {
  int64_t B, H, L, S, E, Ev;
  bool causal, masked;
};
const EdgeCase kEdgeCases[] = {{1, 1, 1, 1, 8, 8, true, false},      {1, 1, 33, 33, 16, 8, true, false},
                               {2, 1, 70, 45, 24, 40, false, true},  {1, 2, 100, 300, 64, 64, true, false},
                               {1, 1, 40, 300, 64, 16, false, true}, {1, 1, 17, 250, 200, 24, false, false},
                               {2, 3, 65, 65, 32, 32, true, true}};

// The fused attention of q0, k0, v0 computed in dtype t, and the gradients of q, k and v for the loss
// sum(out * r): {out, dq, dk, dv}.
std::vector<Tensor> attention_and_grads(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& r,
                                        const Tensor& mask, bool causal, DType t) {
  Tensor q = q0.to(t).clone().requires_grad_(), k = k0.to(t).clone().requires_grad_();
  Tensor v = v0.to(t).clone().requires_grad_();
  Tensor out = F::scaled_dot_product_attention(q, k, v, mask, causal);
  sum(out.to(kF64) * r).backward();
  return {out, q.grad(), k.grad(), v.grad()};
}

// Edge case c computed in dtype t against f64: q, k, v and the loss's weights r drawn by draw(shape) in
// that order, then the mask; out and every gradient of dtype t within tol (relative and absolute).
template <class Draw>
void check_edge_case(const EdgeCase& c, DType t, double tol, Generator& g, const Draw& draw) {
  INFO("B=", c.B, " H=", c.H, " L=", c.L, " S=", c.S, " E=", c.E, " Ev=", c.Ev, " causal=", c.causal,
       " masked=", c.masked);
  Tensor q0 = draw(Shape{c.B, c.H, c.L, c.E}), k0 = draw(Shape{c.B, c.H, c.S, c.E});
  Tensor v0 = draw(Shape{c.B, c.H, c.S, c.Ev}), r = draw(Shape{c.B, c.H, c.L, c.Ev});
  Tensor mask = c.masked ? gt(rand({c.B, 1, c.L, c.S}, kF32, &g), scalar_tensor(0.2, kF32)) : Tensor();
  const auto want = attention_and_grads(q0, k0, v0, r, mask, c.causal, kF64);
  const auto got = attention_and_grads(q0, k0, v0, r, mask, c.causal, t);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(got[i].dtype() == t);
    check_close(got[i], want[i], {.rtol = tol, .atol = tol});
  }
}

}  // namespace

TEST_CASE("attention: forward without a mask, f32, against the double loop") {
  Generator g(1);
  Tensor q = randn_t({2, 3, 5, 8}, kF32, g), k = randn_t({2, 3, 7, 8}, kF32, g), v = randn_t({2, 3, 7, 8}, kF32, g);
  Tensor out = F::scaled_dot_product_attention(q, k, v);
  CHECK(out.shape() == Shape{2, 3, 5, 8});
  CHECK(out.dtype() == kF32);
  check_close(out, reference(q, k, v), {.rtol = 1e-4, .atol = 1e-5});
}

TEST_CASE("attention: causal with L == S, L < S and L > S (top-left aligned)") {
  Generator g(2);
  for (auto [L, S] : {std::pair<int64_t, int64_t>{6, 6}, {4, 9}, {9, 4}}) {
    CAPTURE(L);
    CAPTURE(S);
    Tensor q = randn_t({2, 2, L, 4}, kF32, g), k = randn_t({2, 2, S, 4}, kF32, g), v = randn_t({2, 2, S, 3}, kF32, g);
    check_close(F::scaled_dot_product_attention(q, k, v, Tensor(), true), reference(q, k, v, Tensor(), true),
                {.rtol = 1e-4, .atol = 1e-5});
  }
}

TEST_CASE("attention: padding mask (B, 1, 1, S), full (L, S) mask, and both with causal") {
  Generator g(3);
  const int64_t B = 2, H = 3, L = 4, S = 5, E = 6;
  Tensor q = randn_t({B, H, L, E}, kF32, g), k = randn_t({B, H, S, E}, kF32, g), v = randn_t({B, H, S, E}, kF32, g);
  Tensor pad = bool_mask({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, {B, 1, 1, S});
  check_close(F::scaled_dot_product_attention(q, k, v, pad), reference(q, k, v, pad), {.rtol = 1e-4, .atol = 1e-5});
  Tensor full = bool_mask({1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1}, {L, S});
  check_close(F::scaled_dot_product_attention(q, k, v, full), reference(q, k, v, full), {.rtol = 1e-4, .atol = 1e-5});
  check_close(F::scaled_dot_product_attention(q, k, v, pad, true), reference(q, k, v, pad, true),
              {.rtol = 1e-4, .atol = 1e-5});
  check_close(F::scaled_dot_product_attention(q, k, v, full, true), reference(q, k, v, full, true),
              {.rtol = 1e-4, .atol = 1e-5});
}

TEST_CASE("attention: many leading dims, broadcast batch dims, Ev != E, custom scale") {
  Generator g(4);
  Tensor q = randn_t({2, 2, 3, 4, 5}, kF32, g), k = randn_t({2, 2, 3, 6, 5}, kF32, g);
  Tensor v = randn_t({2, 2, 3, 6, 7}, kF32, g);
  Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), false, 0.3);
  CHECK(out.shape() == Shape{2, 2, 3, 4, 7});
  check_close(out, reference(q, k, v, Tensor(), false, 0.3), {.rtol = 1e-4, .atol = 1e-5});
  // k and v shared across the first batch dim, q without it.
  Tensor kb = randn_t({1, 3, 6, 5}, kF32, g), vb = randn_t({3, 6, 7}, kF32, g), qb = randn_t({2, 3, 4, 5}, kF32, g);
  Tensor ob = F::scaled_dot_product_attention(qb, kb, vb, Tensor(), true);
  CHECK(ob.shape() == Shape{2, 3, 4, 7});
  check_close(ob, reference(qb, kb, vb, Tensor(), true), {.rtol = 1e-4, .atol = 1e-5});
  // A plain 2-D (L, E) problem.
  Tensor q2 = randn_t({3, 5}, kF32, g), k2 = randn_t({4, 5}, kF32, g), v2 = randn_t({4, 2}, kF32, g);
  check_close(F::scaled_dot_product_attention(q2, k2, v2), reference(q2, k2, v2), {.rtol = 1e-4, .atol = 1e-5});
}

TEST_CASE("attention: transposed (B, L, H, D) views and several query blocks") {
  Generator g(5);
  const int64_t B = 2, H = 3, D = 16;
  for (auto [L, S] : {std::pair<int64_t, int64_t>{150, 150}, {70, 130}, {130, 65}}) {
    CAPTURE(L);
    CAPTURE(S);
    Tensor q = heads(randn_t({B, L, H, D}, kF32, g)), k = heads(randn_t({B, S, H, D}, kF32, g));
    Tensor v = heads(randn_t({B, S, H, D}, kF32, g));
    REQUIRE(!q.is_contiguous());
    Tensor mask = gt(rand({B, 1, L, S}, kF32, &g), scalar_tensor(0.3, kF32));
    check_close(F::scaled_dot_product_attention(q, k, v), reference(q, k, v), {.rtol = 1e-4, .atol = 1e-5});
    check_close(F::scaled_dot_product_attention(q, k, v, mask, true), reference(q, k, v, mask, true),
                {.rtol = 1e-4, .atol = 1e-5});
  }
}

TEST_CASE("attention: f64 exact, f16 and bf16 compute in f32 and round the output") {
  Generator g(6);
  Tensor q = randn_t({2, 70, 8}, kF64, g), k = randn_t({2, 33, 8}, kF64, g), v = randn_t({2, 33, 4}, kF64, g);
  Tensor pad = bool_mask({1, 1, 0}, {3}).expand({11, 3}).reshape({33});
  Tensor out = F::scaled_dot_product_attention(q, k, v, pad, true);
  CHECK(out.dtype() == kF64);
  check_close(out, reference(q, k, v, pad, true), {.rtol = 1e-10, .atol = 1e-12});
  for (DType t : {kF16, kBF16}) {
    CAPTURE(t);
    Tensor qh = q.to(t), kh = k.to(t), vh = v.to(t);
    Tensor oh = F::scaled_dot_product_attention(qh, kh, vh, pad, true);
    CHECK(oh.dtype() == t);
    const double tol = t == kF16 ? 2e-3 : 1.6e-2;  // one rounding of the output
    check_close(oh, reference(qh, kh, vh, pad, true), {.rtol = tol, .atol = tol});
  }
}

TEST_CASE("attention: rows with every key masked give zeros and zero gradients, not NaN") {
  Generator g(7);
  Tensor q = randn_t({2, 3, 4}, kF64, g).requires_grad_(), k = randn_t({2, 5, 4}, kF64, g).requires_grad_();
  Tensor v = randn_t({2, 5, 3}, kF64, g).requires_grad_();
  Tensor mask = bool_mask({1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1}, {3, 5});  // row 1 sees nothing
  Tensor out = F::scaled_dot_product_attention(q, k, v, mask, false);
  check_close(out, reference(q, k, v, mask), {.rtol = 1e-10, .atol = 1e-12});
  const V o = values(out);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t e = 0; e < 3; ++e) CHECK(o[size_t((b * 3 + 1) * 3 + e)] == 0.0);
  sum(out * randn_t({2, 3, 3}, kF64, g)).backward();
  const V gq = values(q.grad());
  for (double x : gq) CHECK(std::isfinite(x));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t e = 0; e < 4; ++e) CHECK(gq[size_t((b * 3 + 1) * 4 + e)] == 0.0);
  for (double x : values(k.grad())) CHECK(std::isfinite(x));
  for (double x : values(v.grad())) CHECK(std::isfinite(x));
  // With no key at all (S = 0) every row is empty.
  Tensor e = F::scaled_dot_product_attention(zeros({2, 3, 4}), zeros({2, 0, 4}), zeros({2, 0, 5}));
  CHECK(e.shape() == Shape{2, 3, 5});
  for (double x : values(e)) CHECK(x == 0.0);
}

TEST_CASE("attention: a NaN query gives its own row NaN and leaves the others as they were") {
  Generator g(11);
  const int64_t L = 70;  // three query tiles, the last one part full; an even and an odd row count of keys
  Tensor q = randn_t({2, L, 16}, kF32, g), k = randn_t({2, L, 16}, kF32, g), v = randn_t({2, L, 8}, kF32, g);
  for (DType t : {kF32, kBF16}) {
    CAPTURE(t);
    Tensor qn = q.to(t).clone();
    qn.select(0, 1).select(0, 37).select(0, 5).fill_(std::nan(""));
    const V o = values(F::scaled_dot_product_attention(qn, k.to(t), v.to(t), Tensor(), true));
    const V clean = values(F::scaled_dot_product_attention(q.to(t), k.to(t), v.to(t), Tensor(), true));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t e = 0; e < 8; ++e) {
          const size_t at = size_t((b * L + i) * 8 + e);
          if (b == 1 && i == 37) CHECK(std::isnan(o[at]));
          else CHECK(o[at] == clean[at]);
        }
  }
}

TEST_CASE("attention: the softmax's max is taken over every key (scores 400 apart, the largest on the last key)") {
  Generator g(12);
  for (auto [S, wide] :
       {std::pair<int64_t, bool>{1, true}, {33, true}, {34, true}, {70, true}, {33, false}, {34, false}}) {
    CAPTURE(S);
    CAPTURE(wide);  // the softmax on 16 lanes where the CPU has AVX-512F, else on 8 or 4
    toggles::Scoped lanes(toggles::Toggle::avx512_vec_math, wide);
    Tensor q = randn_t({70, 16}, kF32, g), k = randn_t({S, 16}, kF32, g), v = randn_t({S, 8}, kF32, g);
    q.select(1, 0).fill_(40.0), k.select(0, S - 1).select(0, 0).fill_(40.0);  // q . k_last ~ 1600, scale 1/4
    for (DType t : {kF32, kBF16}) {
      CAPTURE(t);
      Tensor out = F::scaled_dot_product_attention(q.to(t), k.to(t), v.to(t));
      for (double x : values(out)) CHECK(std::isfinite(x));  // a max short of 400 overflows exp
      check_close(out, reference(q.to(t), k.to(t), v.to(t), Tensor(), false), {.rtol = 1.6e-2, .atol = 1.6e-2});
    }
  }
}

TEST_CASE("attention: zero sizes") {
  Tensor a = F::scaled_dot_product_attention(zeros({0, 3, 4}), zeros({0, 5, 4}), zeros({0, 5, 2}));
  CHECK(a.shape() == Shape{0, 3, 2});
  Tensor b = F::scaled_dot_product_attention(zeros({2, 0, 4}), zeros({2, 5, 4}), zeros({2, 5, 2}), Tensor(), true);
  CHECK(b.shape() == Shape{2, 0, 2});
  Tensor q = ones({2, 3, 0}, kF64).requires_grad_(), k = ones({2, 5, 0}, kF64).requires_grad_();
  Tensor v = randn({2, 5, 2}, kF64).requires_grad_();
  Tensor c = F::scaled_dot_product_attention(q, k, v);  // E = 0: uniform weights
  check_close(c, reference(q, k, v, Tensor(), false, 1.0), {.rtol = 1e-10, .atol = 1e-12});
  sum(c).backward();
  CHECK(q.grad().shape() == Shape{2, 3, 0});
  check_close(v.grad(), V(20, 3.0 / 5.0), {.rtol = 1e-10, .atol = 1e-12});
}

// f64, with causal, padding and full masks, views and a broadcast batch.
const test::GradcheckCases kAttentionGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  using VT = std::vector<Tensor>;
  Generator g(8);
  auto leaf = [&](const Shape& s) { return (rand(s, kF64, &g) * 2.0 - 1.0).requires_grad_(); };
  Tensor pad = bool_mask({1, 1, 1, 1, 0, 1, 1, 0, 0, 1}, {2, 1, 1, 5});
  Tensor full = bool_mask({1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1}, {3, 5});  // row 1 fully masked
  const test::GradcheckCase cases[] = {
      {"scaled_dot_product_attention",
       "causal, (B, L, H, D) views, L == S",
       {leaf({2, 5, 2, 3}), leaf({2, 5, 2, 3}), leaf({2, 5, 2, 3})},
       [](const VT& x) {
         return F::scaled_dot_product_attention(heads(x[0]), heads(x[1]), heads(x[2]), Tensor(), true);
       }},
      {"scaled_dot_product_attention",
       "causal, L < S, Ev != E",
       {leaf({2, 3, 4}), leaf({2, 5, 4}), leaf({2, 5, 2})},
       [](const VT& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true); }},
      {"scaled_dot_product_attention",
       "causal, L > S, custom scale",
       {leaf({1, 6, 3}), leaf({1, 4, 3}), leaf({1, 4, 3})},
       [](const VT& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true, 0.7); }},
      {"scaled_dot_product_attention",
       "padding mask (B, 1, 1, S), (B, H, L, E) with H = 2",
       {leaf({2, 2, 3, 3}), leaf({2, 2, 5, 3}), leaf({2, 2, 5, 2})},
       [pad](const VT& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], pad); }},
      {"scaled_dot_product_attention",
       "padding mask and causal, transposed k",
       {leaf({2, 2, 4, 3}), leaf({2, 2, 3, 5}), leaf({2, 2, 5, 3})},
       [pad](const VT& x) { return F::scaled_dot_product_attention(x[0], transpose(x[1], -2, -1), x[2], pad, true); }},
      {"scaled_dot_product_attention",
       "full (L, S) mask with a fully masked row",
       {leaf({2, 3, 2}), leaf({2, 5, 2}), leaf({2, 5, 3})},
       [full](const VT& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], full); }},
      {"scaled_dot_product_attention",
       "k and v broadcast over the batch",
       {leaf({2, 3, 4, 2}), leaf({3, 5, 2}), leaf({1, 3, 5, 2})},
       [](const VT& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true); }},
      {"scaled_dot_product_attention",
       "two query blocks (L = 70), causal",
       {leaf({1, 70, 2}), leaf({1, 70, 2}), leaf({1, 70, 2})},
       [](const VT& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true); }},
  };
  t.insert(t.end(), std::begin(cases), std::end(cases));
});

TEST_CASE("attention: backward matches the composed ops over several blocks; f16 backward") {
  Generator g(9);
  const int64_t B = 2, H = 2, L = 100, S = 90, D = 8;
  Tensor q0 = randn_t({B, L, H, D}, kF64, g), k0 = randn_t({B, S, H, D}, kF64, g), v0 = randn_t({B, S, H, 5}, kF64, g);
  V pad_v(size_t(B * S), 1.0);
  for (int64_t j = 60; j < S; ++j) pad_v[size_t(S + j)] = 0.0;  // batch 1 pads its last 30 keys
  Tensor pad = gt(from_vector(pad_v, {B, 1, 1, S}), scalar_tensor(0.5, kF64));
  Tensor r = randn_t({B, H, L, 5}, kF64, g);
  auto grads = [&](bool fused, DType t) {
    Tensor q = q0.to(t).clone(), k = k0.to(t).clone(), v = v0.to(t).clone();  // fresh leaves
    for (Tensor* x : {&q, &k, &v}) x->requires_grad_();
    Tensor out = fused ? F::scaled_dot_product_attention(heads(q), heads(k), heads(v), pad, true)
                       : composed(heads(q), heads(k), heads(v), pad, true);
    sum(out.to(kF64) * r).backward();
    return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
  };
  auto want = grads(false, kF64), got = grads(true, kF64);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    check_close(got[i], want[i], {.rtol = 1e-8, .atol = 1e-10});
  }
  auto half = grads(true, kF16);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(half[i].dtype() == kF16);
    check_close(half[i], want[i], {.rtol = 2e-2, .atol = 2e-2});
  }
}

// f32 runs on the GEMM micro-kernel with tiles of queries as wide as its panel (16 or 32) and keys and
// values packed once: every f32 kernel, queries past a tile's edge, keys and head dims past the
// kernel's k block (KC: 192 or 256), L != S, masks and causal, a single matrix (split across threads).
TEST_CASE(
    "attention: f32 forward and every gradient agree with f64 on each micro-kernel, across tile and block edges") {
  using cpu::GemmKernel;
  Generator g(21);
  int kernels = 0;
  for (GemmKernel kernel : {GemmKernel::scalar, GemmKernel::avx2, GemmKernel::avx512}) {
    if (!cpu::gemm_kernel_available(kernel)) continue;
    ++kernels;
    cpu::ScopedGemmKernel forced(kernel);
    CAPTURE(cpu::gemm_kernel_name(kernel));
    for (const EdgeCase& c : kEdgeCases)
      check_edge_case(c, kF32, 2e-4, g, [&](const Shape& s) { return randn_t(s, kF64, g); });
  }
  CHECK(kernels >= 1);
}

// Where the softmax saturates (P one-hot) the gradients of q and k are 0: the backward takes the
// softmax's D = sum(P * dP) from the tile, not FlashAttention's rowsum(dO * O), which is 0 only up to
// O's rounding (about 0.02 at scale 1e4 in f32, times the scale). And values near f32's largest
// stay finite: P is normalised before it multiplies v.
TEST_CASE("attention: a saturated softmax gives zero q and k gradients; values near f32's largest stay finite") {
  Generator g(31);
  Tensor q0 = randn_t({1, 1, 37, 16}, kF32, g), k0 = randn_t({1, 1, 45, 16}, kF32, g);
  Tensor v0 = randn_t({1, 1, 45, 24}, kF32, g), gy = randn_t({1, 1, 37, 24}, kF32, g);
  for (double scale : {1e4, 1e6}) {
    CAPTURE(scale);
    Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    F::scaled_dot_product_attention(q, k, v, Tensor(), false, scale).backward(gy);
    CHECK(max(abs(q.grad())).item<double>() < 1e-6);
    CHECK(max(abs(k.grad())).item<double>() < 1e-6);
  }
  Tensor big = abs(v0) * 1e37 + 2e38;  // a sum of unnormalised exponentials times v overflows f32
  Tensor out = F::scaled_dot_product_attention(q0, k0, big, Tensor(), true);
  for (double x : values(out)) CHECK(std::isfinite(x));
  check_close(out, reference(q0, k0, big, Tensor(), true), {.rtol = 1e-4, .atol = 1e33});
}

// bf16 runs its products on the bf16 pair-dot kernel (VDPBF16PS, or its emulation forced), which
// rounds P and dS to bf16 before the products that take them: against f64 on the same bf16 inputs,
// on the shapes above plus keys and head dims past the pair kernel's k block (KC = 384). The inputs
// and the loss's weights r (so dO) are bf16 values. Rounding the result alone costs up to 2^-9 of
// (1 + |want|) (with f32 products these shapes measured 3.4e-3); rounding P and dS about as much again
// (measured 7.9e-3, a dk summed over 65 queries). The bound 1.6e-2, the bf16 forward test's, is twice that.
TEST_CASE("attention: bf16 forward and every gradient agree with f64 on the pair kernel, across tile and block edges" *
          doctest::skip(!cpu::gemm_kernel_available(cpu::GemmKernel::avx512_bf16_emulated))) {
  using cpu::GemmKernel;
  std::vector<EdgeCase> cases(std::begin(kEdgeCases), std::end(kEdgeCases));
  cases.push_back({1, 1, 41, 777, 16, 24, false, true});
  cases.push_back({1, 1, 450, 451, 400, 8, true, false});
  Generator g(23);
  for (GemmKernel kernel : {GemmKernel::avx512_bf16, GemmKernel::avx512_bf16_emulated}) {
    if (!cpu::gemm_kernel_available(kernel)) continue;
    cpu::ScopedGemmKernel forced(kernel);
    CAPTURE(cpu::gemm_kernel_name(kernel));
    REQUIRE(cpu::gemm_panel_width(cpu::GemmPrecision::bf16) == 32);
    for (const EdgeCase& c : cases)  // bf16 values as f64
      check_edge_case(c, kBF16, 1.6e-2, g, [&](const Shape& s) { return randn_t(s, kBF16, g).to(kF64); });
  }
  // The products ran on pairs: P's rounding shows against the f32 kernel's products, and the native
  // kernel has its emulation's bits.
  Tensor q = randn_t({1, 2, 100, 64}, kBF16, g), k = randn_t({1, 2, 100, 64}, kBF16, g);
  Tensor v = randn_t({1, 2, 100, 64}, kBF16, g);
  auto out_on = [&](GemmKernel kernel) {
    cpu::ScopedGemmKernel forced(kernel);
    return values(F::scaled_dot_product_attention(q, k, v, Tensor(), true));
  };
  const V emulated = out_on(GemmKernel::avx512_bf16_emulated);
  CHECK(emulated != out_on(GemmKernel::avx512));
  if (cpu::gemm_kernel_available(GemmKernel::avx512_bf16)) CHECK(emulated == out_on(GemmKernel::avx512_bf16));
}

TEST_CASE("attention: with fused_attention off the composed path gives the fused results, masked rows included") {
  const bool was = toggles::fused_attention();
  Generator g(13);
  const int64_t B = 2, H = 3, L = 7, S = 9, E = 5;
  Tensor q0 = randn_t({B, H, L, E}, kF64, g), k0 = randn_t({B, H, S, E}, kF64, g), v0 = randn_t({B, H, S, 4}, kF64, g);
  V mask_v(size_t(L * S), 1.0);
  for (int64_t j = 0; j < S; ++j) mask_v[size_t(2 * S + j)] = 0.0;  // query row 2 sees no key
  for (int64_t i = 0; i < L; ++i) mask_v[size_t(i * S + 4)] = 0.0;  // nor does anyone see key 4
  Tensor mask = gt(from_vector(mask_v, {L, S}), scalar_tensor(0.5, kF64));
  Tensor r = randn_t({B, H, L, 4}, kF64, g);
  for (bool causal : {false, true})
    for (bool masked : {false, true}) {
      CAPTURE(causal);
      CAPTURE(masked);
      const Tensor m = masked ? mask : Tensor();
      auto run = [&](bool fused) {
        toggles::set_fused_attention(fused);
        Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
        Tensor out = F::scaled_dot_product_attention(q, k, v, m, causal);
        sum(out * r).backward();
        return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
      };
      const auto fused = run(true), composed_ops = run(false);
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        for (double x : values(composed_ops[i])) CHECK(std::isfinite(x));
        check_close(composed_ops[i], fused[i], {.rtol = 1e-9, .atol = 1e-11});
      }
      check_close(composed_ops[0], reference(q0, k0, v0, m, causal), {.rtol = 1e-9, .atol = 1e-11});
    }
  toggles::set_fused_attention(false);
  Tensor q = randn_t({1, 3, 4}, kF64, g).requires_grad_(), k = randn_t({1, 5, 4}, kF64, g).requires_grad_();
  Tensor v = randn_t({1, 5, 2}, kF64, g).requires_grad_();
  Tensor pad = bool_mask({1, 1, 1, 0, 0}, {1, 1, 5});
  const auto grad = autograd::gradcheck(
      [&](const std::vector<Tensor>& x) { return F::scaled_dot_product_attention(x[0], x[1], x[2], pad, true); },
      {q, k, v});
  CHECK_MESSAGE(grad.ok, grad.report);
  // f16 inputs: the masked fill stays finite in f16.
  Tensor h = F::scaled_dot_product_attention(q0.to(kF16), k0.to(kF16), v0.to(kF16), mask, true);
  for (double x : values(h)) CHECK(std::isfinite(x));
  toggles::set_fused_attention(was);
}

TEST_CASE("attention: the result and its gradients do not depend on the thread count") {
  // The threads claim whole matrices as they finish (parallel_claims): which thread takes which,
  // and in what order, varies from run to run and must not show in any bit.
  const int threads = get_num_threads();
  for (DType dt : {kF32, kBF16}) {
    INFO(dt);
    Generator g(10);
    const Tensor q = randn_t({3, 2, 130, 16}, kF32, g).to(dt), k = randn_t({3, 2, 130, 16}, kF32, g).to(dt);
    const Tensor v = randn_t({3, 2, 130, 16}, kF32, g).to(dt), gy = randn_t({3, 2, 130, 16}, kF32, g).to(dt);
    const auto run = [&](int n) {
      set_num_threads(n);
      const Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(), vl = v.detach().requires_grad_();
      const Tensor y = F::scaled_dot_product_attention(ql, kl, vl, Tensor(), true);
      y.backward(gy);
      return std::vector<V>{values(y), values(ql.grad()), values(kl.grad()), values(vl.grad())};
    };
    const std::vector<V> one = run(1);
    for (int n : {2, 3, 5}) CHECK(run(n) == one);
  }
  set_num_threads(threads);
}

TEST_CASE("attention: errors name the op and the offending shapes or dtypes") {
  const char* op = "scaled_dot_product_attention";
  auto sdpa = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m = Tensor()) {
    return F::scaled_dot_product_attention(q, k, v, m);
  };
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({2, 5, 6}), zeros({2, 5, 6})),
                       doctest::Contains("scaled_dot_product_attention: q [2,3,4] and k [2,5,6] must have the same "
                                         "embedding dim E"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({2, 5, 4}), zeros({2, 6, 4})),
                       doctest::Contains("k [2,5,4] and v [2,6,4] must have the same number of keys S"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({2, 5, 4}), zeros({2, 5, 4}), zeros({3, 5})),
                       doctest::Contains("mask must be Bool (true = attend), got f32 [3,5]"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({2, 5, 4}), zeros({2, 5, 4}), zeros({4, 5}, kBool)),
                       doctest::Contains("mask of shape [4,5] does not broadcast to (.., L, S) = [2,3,5]"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({2, 5, 4}), zeros({2, 5, 4}), zeros({3, 2, 3, 5}, kBool)),
                       doctest::Contains("mask of shape [3,2,3,5] does not broadcast"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({2, 5, 4}, kF64), zeros({2, 5, 4})),
                       doctest::Contains("q, k, v must share one floating dtype, got f32, f64, f32"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({3, 4}, kI64), zeros({5, 4}, kI64), zeros({5, 4}, kI64)),
                       doctest::Contains("must share one floating dtype, got i64"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({4}), zeros({5, 4}), zeros({5, 4})),
                       doctest::Contains("of at least 2 dims, got shapes [4], [5,4], [5,4]"), mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(zeros({2, 3, 4}), zeros({3, 5, 4}), zeros({3, 5, 4})),
                       doctest::Contains("the batch dims of q [2,3,4], k [3,5,4] and v [3,5,4] do not broadcast"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(sdpa(Tensor(), zeros({5, 4}), zeros({5, 4})), doctest::Contains(op), mdl::Error);
}
