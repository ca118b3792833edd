// The autograd engine and its rules: accumulation, shared inputs, diamonds, grad_output,
// retain_graph, retain_grad, detach, NoGradGuard, and every wrong use with its message; then a
// 1,000-step training loop whose live memory must not grow and must all return at the end.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/allocator.h"
#include "tensor/error.h"
#include "ops/native/factory.h"
#include "ops/ops.h"

using namespace mdl;

namespace {

Tensor leaf(const std::vector<double>& v, const Shape& s = {}) {
  Tensor t = from_vector(v, s);
  t.requires_grad_();
  return t;
}

void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  REQUIRE(t.defined());
  std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - expected[i]) <= tol, "element ", i, ": ", got[i], " vs ", expected[i]);
}

}  // namespace

TEST_CASE("autograd: gradients accumulate across backward calls") {
  Tensor x = leaf({1.0, -2.0, 3.0});
  sum(x * 3.0).backward();
  check_values(x.grad(), {3, 3, 3});
  sum(x * 3.0).backward();
  check_values(x.grad(), {6, 6, 6});
}

TEST_CASE("autograd: a tensor used twice gets the sum of both gradients") {
  Tensor x = leaf({1.0, -2.0, 3.0});
  sum(x * x).backward();
  check_values(x.grad(), {2, -4, 6});
}

TEST_CASE("autograd: diamond graph") {
  // a = 2x; d = sin(a) + a*a; dd/dx = 2cos(2x) + 8x.
  Tensor x = leaf({0.3, -1.1, 2.0});
  Tensor a = x * 2.0;
  Tensor d = sin(a) + a * a;
  sum(d).backward();
  std::vector<double> xs = {0.3, -1.1, 2.0}, expected;
  for (double v : xs) expected.push_back(2 * std::cos(2 * v) + 8 * v);
  check_values(x.grad(), expected);
}

TEST_CASE("autograd: non-scalar backward takes grad_output") {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = x * x;
  y.backward(from_vector<double>({1, 0.5, -1, 2}, {2, 2}));
  check_values(x.grad(), {2, 2, -6, 16});
}

TEST_CASE("autograd: retain_graph allows a second backward") {
  Tensor x = leaf({1.0, -2.0});
  Tensor y = sum(exp(x) * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  std::vector<double> expected;
  for (double v : {1.0, -2.0}) expected.push_back(2 * std::exp(v) * (1 + v));
  check_values(x.grad(), expected, 1e-12);
}

TEST_CASE("autograd: retain_grad keeps the gradient of a non-leaf") {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = x * 3.0;
  Tensor k = h + 1.0;
  h.retain_grad();
  sum(k * k).backward();
  check_values(h.grad(), {8, 14});  // 2k
  CHECK_FALSE(k.grad().defined());  // not retained
  check_values(x.grad(), {24, 42});
}

TEST_CASE("autograd: detach cuts the graph") {
  Tensor x = leaf({1.0, 2.0});
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  sum(x * d).backward();  // d is a constant: dx = d
  check_values(x.grad(), {1, 2});
  CHECK_FALSE(d.grad().defined());
}

TEST_CASE("autograd: NoGradGuard records nothing") {
  Tensor x = leaf({1.0, 2.0});
  {
    NoGradGuard guard;
    CHECK_FALSE(GradMode::is_enabled());
    Tensor y = exp(x) * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    { NoGradGuard nested; }
    CHECK_FALSE(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
  CHECK(sum(x).requires_grad());
}

TEST_CASE("autograd: is_leaf and zero_grad") {
  Tensor x = leaf({1.0, 2.0});
  Tensor c = ones({2}, kF64);
  Tensor y = x * 2.0;
  CHECK(x.is_leaf());
  CHECK(c.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK((c * 2.0).is_leaf());  // no input needs grad: no history
  sum(y).backward();
  REQUIRE(x.grad().defined());
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x * 5.0).backward();
  check_values(x.grad(), {5, 5});
}

TEST_CASE("autograd: integer tensors cannot require grad") {
  Tensor i = zeros({2}, kI64);
  CHECK_THROWS_WITH_AS(i.requires_grad_(), doctest::Contains("only floating tensors can require gradients"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({2}, kBool).requires_grad_(), doctest::Contains("bool"), mdl::Error);
  CHECK_FALSE(i.requires_grad());
}

TEST_CASE("autograd: wrong uses throw with a message") {
  SUBCASE("backward on a tensor that needs no grad") {
    Tensor y = sum(ones({3}, kF64));
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("does not require grad"), mdl::Error);
  }
  SUBCASE("backward on a non-scalar without grad_output") {
    Tensor y = leaf({1, 2, 3}) * 2.0;
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("only for scalar outputs"), mdl::Error);
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("[3]"), mdl::Error);
  }
  SUBCASE("grad_output of the wrong shape") {
    Tensor y = leaf({1, 2, 3, 4}, {2, 2}) * 2.0;
    CHECK_THROWS_WITH_AS(y.backward(ones({4}, kF64)), doctest::Contains("grad_output of shape [4] does not match"),
                         mdl::Error);
  }
  SUBCASE("second backward through a freed graph (mul)") {
    Tensor x = leaf({1.0, 2.0});
    Tensor y = sum(x * x);
    y.backward();
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("backward through the graph a second time"), mdl::Error);
  }
  SUBCASE("second backward through a freed graph (exp)") {
    Tensor x = leaf({1.0, 2.0});
    Tensor y = sum(exp(x));
    y.backward();
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("retain_graph=true"), mdl::Error);
  }
  SUBCASE("a saved output modified in place") {
    Tensor x = leaf({1.0, 2.0});
    Tensor y = exp(x);  // exp saves its output
    {
      NoGradGuard guard;
      y.mul_(2.0);
    }
    CHECK_THROWS_WITH_AS(sum(y).backward(), doctest::Contains("saved by exp was modified by an in-place operation"),
                         mdl::Error);
  }
  SUBCASE("a saved input modified in place") {
    Tensor a = leaf({1.0, 2.0}), b = leaf({3.0, 4.0});
    Tensor z = a * b;
    {
      NoGradGuard guard;
      b.add_(ones({2}, kF64));
    }
    CHECK_THROWS_WITH_AS(sum(z).backward(), doctest::Contains("saved by mul was modified"), mdl::Error);
  }
  SUBCASE("a saved input filled through a view") {
    Tensor a = leaf({1.0, 2.0, 3.0});
    Tensor c = ones({3}, kF64);
    Tensor z = a * c;
    c.slice(0, 0, 2).fill_(5.0);  // c needs no grad: allowed, but mul saved it
    CHECK_THROWS_WITH_AS(sum(z).backward(), doctest::Contains("mul"), mdl::Error);
  }
  SUBCASE("in-place op on a leaf that requires grad") {
    Tensor x = leaf({1.0, 2.0});
    CHECK_THROWS_WITH_AS(x.add_(ones({2}, kF64)),
                         doctest::Contains("in-place operation on a tensor that requires grad"), mdl::Error);
    CHECK_THROWS_WITH_AS(x.fill_(0.0), doctest::Contains("fill_: in-place operation"), mdl::Error);
    CHECK_THROWS_WITH_AS(x.mul_(2.0), doctest::Contains("mul_: in-place operation"), mdl::Error);
    check_values(x, {1, 2});  // untouched
  }
  SUBCASE("in-place op taking an argument that requires grad") {
    Tensor c = zeros({2}, kF64);
    CHECK_THROWS_WITH_AS(c.add_(leaf({1.0, 2.0})), doctest::Contains("argument that requires grad"), mdl::Error);
    Tensor b = leaf({1.0, 2.0});
    CHECK_THROWS_WITH_AS(c.mul_(b), doctest::Contains("mul_: in-place operation with an argument"), mdl::Error);
    CHECK_THROWS_WITH_AS(c.div_(b), doctest::Contains("div_: in-place operation with an argument"), mdl::Error);
    check_values(c, {0, 0});
  }
}

// Each leaf owns its gradient: in-place clipping or unscaling must change each once. add's backward
// hands one tensor to both inputs, and a leaf root would take the caller's grad_output itself.
TEST_CASE("autograd: leaves never share a gradient tensor, nor take the caller's grad_output") {
  SUBCASE("both inputs of an add") {
    Tensor a = leaf({1.0, 2.0}), b = leaf({3.0, 4.0});
    sum(a + b).backward();
    REQUIRE_FALSE(a.grad().is_same(b.grad()));
    {
      NoGradGuard no_grad;
      a.grad().mul_(3.0);
    }
    check_values(a.grad(), {3, 3});
    check_values(b.grad(), {1, 1});
  }
  SUBCASE("grad_output through an add, and into a leaf root") {
    Tensor a = leaf({1.0, 2.0}), b = leaf({3.0, 4.0}), x = leaf({5.0, 6.0});
    Tensor g = from_vector(std::vector<double>{0.5, 0.25}, {2});
    (a + b).backward(g);
    x.backward(g);
    g.fill_(100.0);
    check_values(a.grad(), {0.5, 0.25});
    check_values(b.grad(), {0.5, 0.25});
    check_values(x.grad(), {0.5, 0.25});
  }
}

TEST_CASE("autograd: a leaf frozen between forward and backward gets no gradient") {
  Tensor x = leaf({1.0, 2.0}), w = leaf({3.0, 4.0});
  Tensor y = sum(x * w);
  x.requires_grad_(false);
  y.backward();
  CHECK_FALSE(x.grad().defined());
  check_values(w.grad(), {1, 2});
}

TEST_CASE("autograd: 1,000 training steps neither leak nor grow memory") {
  const int64_t start = memory_stats().live_bytes;
  {
    Generator gen(7);
    Tensor x = randn({32, 16}, kF32, &gen);
    Tensor labels = randint(0, 10, {32, 1}, kI64, &gen);
    Tensor w1 = randn({16, 32}, kF32, &gen) * 0.25, b1 = zeros({32}), w2 = randn({32, 10}, kF32, &gen) * 0.2;
    std::vector<Tensor> params = {w1, b1, w2};
    for (Tensor& p : params) p.requires_grad_();
    const double lr = 0.1;
    auto step = [&] {
      Tensor h = relu(matmul(x, w1) + b1);                 // (32, 32)
      Tensor logp = log_softmax(matmul(h, w2), -1);        // (32, 10)
      Tensor loss = mean(gather(logp, 1, labels)) * -1.0;  // cross-entropy
      loss.backward();
      NoGradGuard guard;
      for (Tensor& p : params) {
        p.add_(p.grad(), -lr);
        p.zero_grad();
      }
      return loss.item<float>();
    };
    float first = step();
    float last = first;
    int64_t at10 = 0;
    for (int i = 2; i <= 1000; ++i) {
      last = step();
      if (i == 10) at10 = memory_stats().live_bytes;
    }
    CHECK(memory_stats().live_bytes == at10);
    CHECK(last < first);  // it trains
  }
  CHECK(memory_stats().live_bytes == start);
}
