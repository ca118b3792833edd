// cross_entropy, nll_loss, mse_loss and binary_cross_entropy_with_logits against plain double loops:
// label smoothing, ignore_index, the three reductions, (N, C, d..) shapes, huge logits, f16/bf16
// inputs, gradcheck in f64, and every error path.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ops/gradcheck.h"
#include "autograd/node.h"
#include "switches/list/toggles.h"
#include "nn/functional.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "tensor/parallel.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;
using F::Reduction;

namespace {

using V = std::vector<Tensor>;
using Vec = std::vector<double>;

// Gradcheck of a loss composed of other ops (the table's cases cover the ops themselves).
void gradcheck_composed(const V& inputs, const autograd::GradcheckFn& fn) {
  auto r = autograd::gradcheck(fn, inputs, 1e-6, 1e-5, 1e-3);
  CHECK_MESSAGE(r.ok, r.report);
}


// Per-element cross-entropy of logits (N, C, D) and targets (N, D); ignored ones are 0.
Vec ref_ce(const Vec& x, const std::vector<int64_t>& t, int64_t N, int64_t C, int64_t D, double ls, int64_t ignore) {
  Vec out(size_t(N * D));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      auto at = [&](int64_t c) { return x[size_t((n * C + c) * D + d)]; };
      double m = -INFINITY, s = 0, mean_nlp = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, at(c));
      for (int64_t c = 0; c < C; ++c) s += std::exp(at(c) - m);
      const double lse = m + std::log(s);
      for (int64_t c = 0; c < C; ++c) mean_nlp += (lse - at(c)) / double(C);
      const int64_t k = t[size_t(n * D + d)];
      out[size_t(n * D + d)] = k == ignore ? 0.0 : (1 - ls) * (lse - at(k)) + ls * mean_nlp;
    }
  return out;
}

double reduce_ref(const Vec& el, Reduction r, double count) {
  double s = 0;
  for (double v : el) s += v;
  return r == Reduction::Sum ? s : s / count;
}

}  // namespace

// ---- cross entropy ---------------------------------------------------------------------------

TEST_CASE(
    "loss: cross_entropy, fused or composed, matches log-softmax + gather with smoothing, ignore_index and every reduction") {
  const bool was_fused = toggles::fused_cross_entropy();
  for (bool fused : {true, false}) {
    toggles::set_fused_cross_entropy(fused);  // off: log_softmax then nll_loss, composed of ops
    CAPTURE(fused);
    Generator g(21);
    for (DType t : {kF64, kF32}) {
      const Tol tol = t == kF64 ? Tol{1e-12, 1e-14} : Tol{2e-6, 2e-8};
      // (N, C) from a transposed view, and (N, C, d1, d2).
      for (const Shape& s : {Shape{9, 7}, Shape{3, 5, 2, 4}}) {
        const int64_t N = s[0], C = s[1], D = shape_numel(s) / (N * C);
        Tensor x = uniform(s, g, -4, 4, t);
        if (s.size() == 2) x = x.t().contiguous().t();
        Shape ts = s;
        ts.erase(ts.begin() + 1);
        std::vector<int64_t> tv = randint(0, C, ts, kI64, &g).to_vector<int64_t>();
        tv[1] = -100;
        tv[4] = 3;
        Tensor target = from_vector(tv, ts);
        const double count = double(std::count_if(tv.begin(), tv.end(), [](int64_t v) { return v != -100; }));
        for (double ls : {0.0, 0.1, 1.0}) {
          Vec el = ref_ce(values(x.contiguous()), tv, N, C, D, ls, -100);
          Tensor none = F::cross_entropy(x, target, {.label_smoothing = ls, .reduction = Reduction::None});
          CHECK(none.shape() == ts);
          CHECK(none.dtype() == t);
          check_close(none, el, tol);
          Tensor mean = F::cross_entropy(x, target, {.label_smoothing = ls});
          CHECK(mean.dim() == 0);
          check_close(mean, {reduce_ref(el, Reduction::Mean, count)}, tol);
          Tensor sum = F::cross_entropy(x, target, {.label_smoothing = ls, .reduction = Reduction::Sum});
          check_close(sum, {reduce_ref(el, Reduction::Sum, count)}, tol);
        }
        // Without smoothing it equals log_softmax + nll_loss.
        check_close(F::cross_entropy(x, target), F::nll_loss(log_softmax(x, 1), target), tol);
        // A different ignore_index: -100 is then out of range, so use class 3.
        tv[1] = 0;
        Tensor t2 = from_vector(tv, ts);
        const double c2 = double(std::count_if(tv.begin(), tv.end(), [](int64_t v) { return v != 3; }));
        Vec el2 = ref_ce(values(x.contiguous()), tv, N, C, D, 0.2, 3);
        check_close(F::cross_entropy(x, t2, {.label_smoothing = 0.2, .ignore_index = 3}),
                    {reduce_ref(el2, Reduction::Mean, c2)}, tol);
      }
    }
    // One sample: logits (C), target ().
    Tensor x1 = from_vector<double>({1.0, 2.0, 0.5});
    check_close(F::cross_entropy(x1, scalar_tensor(1, kI64)), ref_ce({1.0, 2.0, 0.5}, {1}, 1, 3, 1, 0, -100),
                {.rtol = 1e-12, .atol = 1e-14});
    if (!fused) {  // the composed form's gradient, op by op, with smoothing and an ignored target
      Tensor xg = uniform({5, 4, 3}, g, -2, 2).requires_grad_(true);
      Tensor tg = from_vector<int64_t>({0, 1, 2, 3, -100, 1, 2, 0, 3, 1, 2, 2, 0, 1, 3}, {5, 3});
      gradcheck_composed({xg}, [&](const V& v) { return F::cross_entropy(v[0], tg, {.label_smoothing = 0.1}); });
    }
  }
  toggles::set_fused_cross_entropy(was_fused);
  CHECK(toggles::fused_cross_entropy());
}

TEST_CASE("loss: cross_entropy is finite for huge logits and NaN when every target is ignored") {
  Tensor x = from_vector<float>({1e4f, 0.f, -1e4f, -1e4f, 1e4f, 1e4f}, {2, 3});
  Tensor t = from_vector<int64_t>({0, 2});
  Tensor none = F::cross_entropy(x, t, {.reduction = Reduction::None});
  check_close(none, {0.0, std::log(2.0)}, {.rtol = 1e-6, .atol = 1e-8});
  Tensor t1 = from_vector<int64_t>({1, 0});
  Tensor l1 = F::cross_entropy(x.clone().requires_grad_(), t1, {.label_smoothing = 0.1});
  CHECK(std::isfinite(l1.item<float>()));
  // Row 0: every term is 1e4. Row 1: nll 2e4 + log 2, mean over classes (2e4 + 3 log 2) / 3.
  const double ln2 = std::log(2.0);
  CHECK(l1.item<float>() == doctest::Approx((1e4 + 0.9 * (2e4 + ln2) + 0.1 * (2e4 / 3 + ln2)) / 2).epsilon(1e-5));
  Tensor xl = x.clone().requires_grad_();
  F::cross_entropy(xl, t1).backward();
  for (double v : values(xl.grad())) CHECK(std::isfinite(v));
  check_close(xl.grad(), {0.5, -0.5, 0.0, -0.5, 0.25, 0.25}, {.rtol = 1e-6, .atol = 1e-8});

  Tensor all = from_vector<int64_t>({-100, -100});
  CHECK(std::isnan(F::cross_entropy(x, all).item<float>()));
  CHECK(F::cross_entropy(x, all, {.reduction = Reduction::Sum}).item<float>() == 0.0f);
  CHECK(values(F::cross_entropy(x, all, {.reduction = Reduction::None})) == Vec{0.0, 0.0});
  Tensor xa = x.clone().requires_grad_();
  F::cross_entropy(xa, all, {.reduction = Reduction::Sum}).backward();
  CHECK(values(xa.grad()) == Vec(6, 0.0));
  // An empty batch: mean is NaN as in PyTorch, sum 0.
  CHECK(std::isnan(F::cross_entropy(zeros({0, 4}), zeros({0}, kI64)).item<float>()));
  CHECK(F::cross_entropy(zeros({0, 4}), zeros({0}, kI64), {.reduction = Reduction::Sum}).item<float>() == 0.0f);
}

TEST_CASE("loss: cross_entropy of equal logits up to 1e30 is log C, fused or not, in every float dtype") {
  const bool was_fused = toggles::fused_cross_entropy();
  for (bool fused : {true, false}) {
    toggles::set_fused_cross_entropy(fused);
    for (DType dt : {kF32, kF64, kBF16}) {
      for (double v : {1e15, 1e16, 1e17, 1e30, -1e30}) {
        CAPTURE(fused);
        CAPTURE(dt);
        CAPTURE(v);
        Tensor x = full({2, 5}, v, dt);
        Tensor t = from_vector<int64_t>({1, 4});
        const double log5 = std::log(5.0);
        check_close(F::cross_entropy(x, t, {.reduction = Reduction::None}), {log5, log5}, {.rtol = 1e-6});
        check_close(F::cross_entropy(x, t, {.label_smoothing = 0.2}), {log5}, {.rtol = 1e-6});
        Tensor xg = x.clone().requires_grad_();
        F::cross_entropy(xg, t, {.reduction = Reduction::Sum}).backward();
        const double gtol = dt == kBF16 ? 1e-2 : 1e-6;
        check_close(xg.grad(), {0.2, -0.8, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, -0.8}, {.rtol = gtol, .atol = gtol});
      }
    }
  }
  toggles::set_fused_cross_entropy(was_fused);
}

TEST_CASE("loss: cross_entropy on f16/bf16 logits computes in f32 and returns f32") {
  Generator g(22);
  for (DType t : {kF16, kBF16}) {
    Tensor x = uniform({16, 10}, g, -5, 5, t);
    Tensor target = randint(0, 10, {16}, kI64, &g);
    Tensor l = F::cross_entropy(x, target, {.reduction = Reduction::None});
    CHECK(l.dtype() == kF32);
    check_close(l, ref_ce(values(x), target.to_vector<int64_t>(), 16, 10, 1, 0, -100), {.rtol = 1e-5, .atol = 1e-7});
    Tensor xl = x.clone().requires_grad_(), xf = x.to(kF32).requires_grad_();
    F::cross_entropy(xl, target, {.label_smoothing = 0.05}).backward();
    F::cross_entropy(xf, target, {.label_smoothing = 0.05}).backward();
    CHECK(xl.grad().dtype() == t);
    check_close(xl.grad(), xf.grad(), t == kF16 ? Tol{1e-3, 1e-5} : Tol{1e-2, 1e-4});
  }
}

TEST_CASE("loss: cross_entropy gives the same bits on 1 and 2 threads") {
  Generator g(23);
  Tensor x = uniform({2048, 50}, g, -3, 3, kF32);
  Tensor t = randint(0, 50, {2048}, kI64, &g);
  Tensor xs = uniform({8, 20, 512}, g, -3, 3, kF32);
  Tensor ts = randint(0, 20, {8, 512}, kI64, &g);
  auto run = [&] {
    Tensor a = x.clone().requires_grad_(), b = xs.clone().requires_grad_();
    Tensor la = F::cross_entropy(a, t, {.label_smoothing = 0.1}), lb = F::cross_entropy(b, ts);
    (la + lb).backward();
    return std::vector<Vec>{values(la), values(lb), values(a.grad()), values(b.grad())};
  };
  const int threads = get_num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(std::max(threads, 2));
  auto two = run();
  set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
  check_close(one[1],
              {reduce_ref(ref_ce(values(xs), ts.to_vector<int64_t>(), 8, 20, 512, 0, -100), Reduction::Mean, 8 * 512)},
              {.rtol = 1e-5, .atol = 1e-7});
}

const test::GradcheckCases kCrossEntropyGradcheckCases([](std::vector<test::GradcheckCase>& cases) {
  Generator g(24);
  V in{leaf_of(uniform({5, 4}, g, -2, 2))};
  Tensor t = from_vector<int64_t>({1, -100, 3, 0, 3});
  cases.push_back({"cross_entropy", "mean over a double-transposed view", in,
                   [t](const V& v) { return F::cross_entropy(v[0].t().t(), t); }});
  cases.push_back({"cross_entropy", "sum, label smoothing 0.3", in, [t](const V& v) {
                     return F::cross_entropy(v[0], t, {.label_smoothing = 0.3, .reduction = Reduction::Sum});
                   }});
  cases.push_back({"cross_entropy", "none, label smoothing 0.1", in, [t](const V& v) {
                     return F::cross_entropy(v[0], t, {.label_smoothing = 0.1, .reduction = Reduction::None});
                   }});
  V in2{leaf_of(uniform({2, 3, 4, 2}, g, -2, 2))};
  Tensor t2 = from_vector<int64_t>({0, 1, 2, 1, 0, 0, 2, 1, 1, 1, 0, 2, 2, 2, 0, 1}, {2, 4, 2});
  cases.push_back({"cross_entropy", "(N, C, d1, d2) view, label smoothing 0.2", in2, [t2](const V& v) {
                     return F::cross_entropy(v[0].transpose(2, 3).transpose(2, 3), t2, {.label_smoothing = 0.2});
                   }});
  cases.push_back({"cross_entropy", "(N, C, d1, d2), none", in2,
                   [t2](const V& v) { return F::cross_entropy(v[0], t2, {.reduction = Reduction::None}); }});
});

// ---- nll, mse, bce -------------------------------------------------------------------------------

TEST_CASE("loss: nll_loss picks -log_probs[target], ignoring ignore_index") {
  Tensor lp = from_vector<double>({-0.1, -2.0, -3.0, -1.5, -0.7, -0.2}, {2, 3});
  Tensor t = from_vector<int64_t>({2, 0});
  check_close(F::nll_loss(lp, t, -100, Reduction::None), {3.0, 1.5}, {.rtol = 1e-12, .atol = 1e-14});
  check_close(F::nll_loss(lp, t), {2.25}, {.rtol = 1e-12, .atol = 1e-14});
  check_close(F::nll_loss(lp, t, -100, Reduction::Sum), {4.5}, {.rtol = 1e-12, .atol = 1e-14});
  check_close(F::nll_loss(lp, from_vector<int64_t>({2, 7}), 7), {3.0}, {.rtol = 1e-12, .atol = 1e-14});
  CHECK(std::isnan(F::nll_loss(lp, from_vector<int64_t>({7, 7}), 7).item<double>()));
  // (N, C, d) and an f16 input (f32 loss).
  Tensor lp3 = from_vector<double>({-1, -2, -3, -4, -5, -6, -7, -8}, {1, 2, 4});
  check_close(F::nll_loss(lp3, from_vector<int64_t>({0, 1, 1, -100}, {1, 4}), -100, Reduction::None), {1, 6, 7, 0},
              {.rtol = 1e-12, .atol = 1e-14});
  CHECK(F::nll_loss(lp.to(kF16), t).dtype() == kF32);
  V in{leaf_of(from_vector<double>({-0.3, -1.1, -2.2, -0.9, -0.4, -1.7}, {2, 3}))};
  gradcheck_composed(in, [](const V& v) { return F::nll_loss(v[0].t().t(), from_vector<int64_t>({1, -100})); });
  gradcheck_composed(in, [](const V& v) {
    return F::nll_loss(v[0], from_vector<int64_t>({1, 2}), -100, Reduction::None);
  });
}

// An ignored row may hold -inf or NaN (a masked vocabulary entry, a padding row): it adds nothing,
// and a batch with every target ignored gives a NaN mean but zero gradients, as PyTorch, on both
// the fused cross-entropy and the composed one (nll_loss after log_softmax).
TEST_CASE("loss: ignored rows holding -inf or NaN add nothing; every target ignored leaves zero gradients") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor t = from_vector<int64_t>({2, -100});
  Tensor lp = from_vector<float>({std::log(0.2f), std::log(0.3f), std::log(0.5f), -inf, 0, -inf}, {2, 3});
  check_close(F::nll_loss(lp, t), {-double(std::log(0.5f))}, {.rtol = 1e-6, .atol = 1e-8});
  const bool was_fused = toggles::fused_cross_entropy();
  for (bool fused : {true, false})
    for (double ls : {0.0, 0.1}) {
      toggles::set_fused_cross_entropy(fused);
      CAPTURE(fused);
      CAPTURE(ls);
      for (float junk : {-inf, nan}) {
        Tensor x = from_vector<float>({0, 1, 2, junk, 0, 1}, {2, 3});
        const float loss = F::cross_entropy(x, t, {.label_smoothing = ls}).item<float>();
        Tensor row0 = from_vector<float>({0, 1, 2}, {1, 3});
        CHECK(loss ==
              doctest::Approx(F::cross_entropy(row0, from_vector<int64_t>({2}), {.label_smoothing = ls}).item<float>())
                  .epsilon(1e-6));
      }
      Tensor xa = from_vector<float>({0, 1, 2, -inf, 0, 1}, {2, 3}).requires_grad_();
      Tensor all = F::cross_entropy(xa, from_vector<int64_t>({-100, -100}), {.label_smoothing = ls});
      CHECK(std::isnan(all.item<float>()));
      all.backward();
      CHECK(values(xa.grad()) == Vec(6, 0.0));
    }
  toggles::set_fused_cross_entropy(was_fused);
  Tensor la = from_vector<double>({-1, -2, -3, -4}, {2, 2}).requires_grad_();
  F::nll_loss(la, from_vector<int64_t>({-100, -100})).backward();
  CHECK(values(la.grad()) == Vec(4, 0.0));
}

TEST_CASE("loss: mse_loss with each reduction, mixed dtypes, gradcheck") {
  Tensor a = from_vector<double>({1, 2, 3, 4}, {2, 2}), b = from_vector<double>({0, 2, 5, 1}, {2, 2});
  check_close(F::mse_loss(a, b, Reduction::None), {1, 0, 4, 9}, {.rtol = 1e-12, .atol = 1e-14});
  check_close(F::mse_loss(a, b), {3.5}, {.rtol = 1e-12, .atol = 1e-14});
  check_close(F::mse_loss(a, b, Reduction::Sum), {14}, {.rtol = 1e-12, .atol = 1e-14});
  CHECK(F::mse_loss(a.to(kF16), b.to(kF16)).dtype() == kF32);
  CHECK(F::mse_loss(a.to(kF16), b.to(kF16)).item<float>() == 3.5f);
  Generator g(25);
  V in{leaf_of(uniform({3, 4}, g)), leaf_of(uniform({4, 3}, g))};
  gradcheck_composed(in, [](const V& v) { return F::mse_loss(v[0], v[1].t()); });
  gradcheck_composed(in, [](const V& v) { return F::mse_loss(v[0].t(), v[1], Reduction::None); });
}

TEST_CASE("loss: binary_cross_entropy_with_logits is stable and matches the textbook formula") {
  Generator g(26);
  Tensor x = uniform({5, 6}, g, -6, 6), t = uniform({5, 6}, g, 0, 1);
  Vec xv = values(x), tv = values(t), el;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double s = 1 / (1 + std::exp(-xv[i]));
    el.push_back(-(tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s)));
  }
  check_close(F::binary_cross_entropy_with_logits(x, t, Reduction::None), el, {.rtol = 1e-10, .atol = 1e-12});
  check_close(F::binary_cross_entropy_with_logits(x, t), {reduce_ref(el, Reduction::Mean, 30)},
              {.rtol = 1e-10, .atol = 1e-12});
  check_close(F::binary_cross_entropy_with_logits(x, t, Reduction::Sum), {reduce_ref(el, Reduction::Sum, 1)},
              {.rtol = 1e-10, .atol = 1e-12});
  // Huge logits: finite, and the gradient at 0 is sigmoid(0) - t.
  Tensor big = from_vector<float>({1000.f, -1000.f, 0.f}).requires_grad_();
  Tensor bt = from_vector<float>({0.f, 0.f, 0.25f});
  Tensor l = F::binary_cross_entropy_with_logits(big, bt, Reduction::None);
  check_close(l, {1000.0, 0.0, std::log(2.0)}, {.rtol = 1e-6, .atol = 1e-8});
  sum(l).backward();
  check_close(big.grad(), {1.0, 0.0, 0.25}, {.rtol = 1e-6, .atol = 1e-8});
  CHECK(F::binary_cross_entropy_with_logits(big.detach().to(kBF16), bt.to(kBF16)).dtype() == kF32);
}

// At x = +-inf the loss is inf, or 0 where the target agrees (PyTorch gives NaN for x = -inf, y = 1),
// and the gradient sigmoid(x) - y; a NaN target still gives NaN.
TEST_CASE("loss: binary_cross_entropy_with_logits at infinite logits is inf or 0, never NaN") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {kF32, kF64}) {
    CAPTURE(t);
    Tensor x = from_vector<double>({inf, inf, inf, -inf, -inf, -inf, inf, 3.0}).to(t).requires_grad_();
    const Tensor y = from_vector<double>({0.0, 1.0, 0.5, 0.0, 1.0, 0.25, nan, nan}).to(t);
    const Tensor l = F::binary_cross_entropy_with_logits(x, y, Reduction::None);
    const Vec got = values(l);
    const Vec want{inf, 0.0, inf, 0.0, inf, inf};
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
    CHECK(std::isnan(got[6]));
    CHECK(std::isnan(got[7]));
    sum(l.narrow(0, 0, 6)).backward();
    const Vec gx = values(x.grad()), want_gx{1.0, 0.0, 0.5, 0.0, -1.0, -0.25};
    CHECK(Vec(gx.begin(), gx.begin() + 6) == want_gx);
  }
}

const test::GradcheckCases kBceGradcheckCases([](std::vector<test::GradcheckCase>& cases) {
  Generator g(27);
  V in{leaf_of(uniform({3, 4}, g, -3, 3)), leaf_of(uniform({4, 3}, g, 0, 1))};
  cases.push_back({"bce_with_logits", "mean, transposed target needing grad", in,
                   [](const V& v) { return F::binary_cross_entropy_with_logits(v[0], v[1].t()); }});
  cases.push_back({"bce_with_logits", "none, transposed logits", in,
                   [](const V& v) { return F::binary_cross_entropy_with_logits(v[0].t(), v[1], Reduction::None); }});
  cases.push_back({"bce_with_logits", "sum, transposed target", in,
                   [](const V& v) { return F::binary_cross_entropy_with_logits(v[0], v[1].t(), Reduction::Sum); }});
});

TEST_CASE("loss: errors name the op, the offending value, dtype or shapes") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH_AS(
      F::cross_entropy(x, from_vector<int64_t>({0, 4, 1})),
      doctest::Contains("cross_entropy: target 4 is out of range for 4 classes (input of shape [3,4])"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, from_vector<int64_t>({0, -1, 1})),
                       doctest::Contains("cross_entropy: target -1 is out of range"), mdl::Error);
  CHECK_THROWS_WITH_AS(
      F::cross_entropy(x, zeros({3})),
      doctest::Contains("cross_entropy: target must hold integer class indices (I64, I32 or U8), got f32"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, zeros({4}, kI64)),
                       doctest::Contains("cross_entropy: target of shape [4] does not match the input of shape [3,4] "
                                         "(expected a target of shape [3])"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(zeros({2, 3, 5}), zeros({2, 3}, kI64)),
                       doctest::Contains("expected a target of shape [2,5]"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(x, zeros({3}, kI64), {.label_smoothing = 1.5}),
                       doctest::Contains("cross_entropy: label_smoothing must be in [0, 1], got 1.5"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(zeros({3, 4}, kI64), zeros({3}, kI64)),
                       doctest::Contains("cross_entropy: expected floating logits (f32, f16, bf16, f64), got i64"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::cross_entropy(zeros({}), zeros({}, kI64)),
                       doctest::Contains("cross_entropy: expected input of shape (C), (N, C) or (N, C, d1, ...)"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(F::nll_loss(x, from_vector<int64_t>({0, 9, 1})),
                       doctest::Contains("nll_loss: target 9 is out of range for 4 classes"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::nll_loss(x, zeros({3}, kBool)),
                       doctest::Contains("nll_loss: target must hold integer class indices (I64, I32 or U8), got bool"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(
      F::mse_loss(x, zeros({4})),
      doctest::Contains("mse_loss: input of shape [3,4] and target of shape [4] must have the same shape"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::mse_loss(x, zeros({3, 4}, kI64)),
                       doctest::Contains("mse_loss: input and target must be floating, got f32 and i64"), mdl::Error);
  CHECK_THROWS_WITH_AS(F::binary_cross_entropy_with_logits(x, zeros({4, 3})),
                       doctest::Contains("binary_cross_entropy_with_logits: input of shape [3,4] and target of shape "
                                         "[4,3] must have the same shape"),
                       mdl::Error);
}
