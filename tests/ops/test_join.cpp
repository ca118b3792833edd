// The native cat, stack, split and split_with_sizes against plain loops over coordinates: every
// dim, negative dims, non-contiguous and zero-size inputs, dtype promotion, every error path;
// then the public ops (which add autograd) against the native ones.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ops/gradcheck.h"
#include "autograd/node.h"
#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

Tensor rnd(const Shape& s, DType t) {
  if (t == kBool) return randint(0, 2, s, kI64).to(kBool);
  return randint(-8, 8, s, kI64).to(t);
}

// The same values as x, laid out with the first and last dims swapped in memory.
Tensor transposed(const Tensor& x) {
  if (x.dim() < 2) return x;
  return x.transpose(0, -1).contiguous().transpose(0, -1);
}

// Checks out == cat(xs, d) by finding, for each output element, the input and offset it came from.
void check_cat(const Tensor& out, const std::vector<Tensor>& xs, int64_t d) {
  std::vector<std::vector<double>> xv;
  for (const Tensor& x : xs) xv.push_back(values(x));
  auto o = values(out);
  std::vector<double> want(o.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape c = unravel(i, out.shape());
    size_t k = 0;
    while (c[size_t(d)] >= xs[k].size(d)) c[size_t(d)] -= xs[k++].size(d);
    want[size_t(i)] = xv[k][size_t(ravel(c, xs[k].shape()))];
  }
  CHECK(o == want);
}

}  // namespace

TEST_CASE("join cat: every dim against a loop") {
  manual_seed(11);
  for (DType t : {kF32, kF64, kF16, kI64, kBool})
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      CAPTURE(t);
      CAPTURE(dim);
      int64_t d = dim < 0 ? dim + 3 : dim;
      std::vector<Tensor> xs;
      for (int64_t n : {2, 0, 3, 1}) {
        Shape s = {3, 4, 5};
        s[size_t(d)] = n;
        xs.push_back(n == 3 ? transposed(rnd(s, t)) : rnd(s, t));
      }
      xs.push_back(rnd({3, 4, 5}, t).slice(d, 1, 5, 2));  // strided
      Tensor out = native::cat(xs, dim);
      Shape want = {3, 4, 5};
      want[size_t(d)] = 2 + 0 + 3 + 1 + (d == 0 ? 1 : 2);
      REQUIRE(out.shape() == want);
      CHECK(out.dtype() == t);
      check_cat(out, xs, d);
    }
  // One tensor; a large one (threaded copies); 1-D.
  Tensor x = randn({5, 7});
  CHECK(values(native::cat({x}, 1)) == values(x));
  std::vector<Tensor> big = {randn({300, 200}), randn({200, 300}).t(), randn({300, 1})};
  check_cat(native::cat(big, 1), big, 1);
  check_cat(native::cat({arange(3.0), arange(2.0)}, 0), {arange(3.0), arange(2.0)}, 0);
}

TEST_CASE("join cat: promotion, empty 1-D tensors and zero-size results") {
  Tensor a = ones({2, 2}), b = full({1, 2}, 2.0, kF64), c = full({1, 2}, 3.0, kI64);
  Tensor out = native::cat({a, b, c}, 0);
  CHECK(out.dtype() == kF64);
  CHECK(values(out) == std::vector<double>{1, 1, 1, 1, 2, 2, 3, 3});
  CHECK(native::cat({full({1}, 1.0, kI64), full({1}, 2.5, kF16)}, 0).dtype() == kF16);
  // As in PyTorch, 1-D empty tensors are skipped whatever the others' shapes.
  Tensor e = native::cat({zeros({0}), a, zeros({0})}, 1);
  CHECK(e.shape() == Shape{2, 2});
  CHECK(native::cat({zeros({0}), zeros({0})}, 0).shape() == Shape{0});
  CHECK(native::cat({zeros({0, 3}), zeros({0, 3})}, 0).shape() == Shape{0, 3});
  CHECK(native::cat({zeros({2, 0}), zeros({2, 0})}, 1).shape() == Shape{2, 0});
}

TEST_CASE("join cat: errors") {
  CHECK_THROWS_WITH_AS(native::cat({}, 0), doctest::Contains("cat: expected a non-empty list of tensors"), Error);
  CHECK_THROWS_WITH_AS(
      native::cat({ones({2, 3}), ones({2, 4})}, 0),
      doctest::Contains(
          "cat: shapes must match except in dim 0, but tensor 0 has shape [2,3] and tensor 1 has shape [2,4]"),
      Error);
  CHECK_THROWS_WITH_AS(native::cat({ones({2, 3}), ones({2, 3, 1})}, 1),
                       doctest::Contains("cat: shapes must match except in dim 1"), Error);
  CHECK_THROWS_WITH_AS(native::cat({ones({2}), scalar_tensor(1.0)}, 0),
                       doctest::Contains("cat: zero-dimensional tensor (at position 1) cannot be concatenated"), Error);
  CHECK_THROWS_WITH_AS(native::cat({ones({2, 3})}, 2), doctest::Contains("cat: dim 2 out of range"), Error);
}

TEST_CASE("join stack: every dim") {
  manual_seed(12);
  for (int64_t dim : {0, 1, 2, -1, -2}) {
    CAPTURE(dim);
    std::vector<Tensor> xs = {rnd({3, 4}, kF32), transposed(rnd({3, 4}, kF32)), rnd({3, 4}, kF32)};
    Tensor out = native::stack(xs, dim);
    int64_t d = dim < 0 ? dim + 3 : dim;
    Shape want = {3, 4};
    want.insert(want.begin() + d, 3);
    REQUIRE(out.shape() == want);
    auto o = values(out);
    bool ok = true;
    for (int64_t i = 0; i < out.numel(); ++i) {
      Shape c = unravel(i, out.shape());
      int64_t k = c[size_t(d)];
      c.erase(c.begin() + d);
      ok &= o[size_t(i)] == values(xs[size_t(k)])[size_t(ravel(c, {3, 4}))];
    }
    CHECK(ok);
  }
  Tensor s = native::stack({scalar_tensor(1.0), scalar_tensor(2.0)}, 0);
  CHECK(s.shape() == Shape{2});
  CHECK(values(s) == std::vector<double>{1, 2});
  CHECK(native::stack({zeros({0, 2}), zeros({0, 2})}, 1).shape() == Shape{0, 2, 2});
}

TEST_CASE("join stack: errors") {
  CHECK_THROWS_WITH_AS(native::stack({}, 0), doctest::Contains("stack: expected a non-empty list of tensors"), Error);
  CHECK_THROWS_WITH_AS(
      native::stack({ones({2, 3}), ones({3, 2})}, 0),
      doctest::Contains(
          "stack: expected tensors of one shape, but tensor 0 has shape [2,3] and tensor 1 has shape [3,2]"),
      Error);
  CHECK_THROWS_WITH_AS(native::stack({ones({2})}, 2), doctest::Contains("stack: dim 2 out of range"), Error);
}

TEST_CASE("join split: views of equal pieces, the last smaller") {
  Tensor x = arange(35.0).view({5, 7});
  for (int64_t dim : {0, 1, -1}) {
    int64_t d = dim < 0 ? dim + 2 : dim, n = x.size(d);
    for (int64_t size : {1, 2, 3, 7, 10}) {
      CAPTURE(dim);
      CAPTURE(size);
      auto parts = native::split(x, size, dim);
      CHECK(int64_t(parts.size()) == std::max<int64_t>(1, (n + size - 1) / size));
      int64_t off = 0;
      for (const Tensor& p : parts) {
        CHECK(p.storage() == x.storage());  // a view
        CHECK(p.size(d) == std::min(size, n - off));
        CHECK(values(p) == values(x.narrow(d, off, p.size(d))));
        off += p.size(d);
      }
      CHECK(off == n);
      check_cat(native::cat(parts, dim), parts, d);
    }
  }
  auto t = native::split(x.t(), 3, 1);  // non-contiguous input
  CHECK(values(t[1]) == values(x.t().narrow(1, 3, 2)));
  auto e = native::split(zeros({0, 3}), 2, 0);
  REQUIRE(e.size() == 1);
  CHECK(e[0].shape() == Shape{0, 3});
  CHECK(native::split(zeros({0, 3}), 0, 0).size() == 1);
}

TEST_CASE("join public ops agree with the native ones") {
  manual_seed(13);
  Tensor x = randn({4, 6}), y = randn({4, 2});
  CHECK(values(cat({x, y}, -1)) == values(native::cat({x, y}, -1)));
  CHECK(values(stack({x, x}, 1)) == values(native::stack({x, x}, 1)));
  auto a = split(x, 4, 1), b = native::split(x, 4, 1);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(values(a[i]) == values(b[i]));
  auto c = split(x, std::vector<int64_t>{1, 3}, 0);
  REQUIRE(c.size() == 2);
  CHECK(values(c[1]) == values(x.narrow(0, 1, 3)));
  auto d = chunk(arange(10.0), 3);
  REQUIRE(d.size() == 3);
  CHECK(d[2].numel() == 2);
}

TEST_CASE("join split: errors") {
  CHECK_THROWS_WITH_AS(native::split(ones({4}), -1, 0),
                       doctest::Contains("split: split_size must be non-negative, got -1"), Error);
  CHECK_THROWS_WITH_AS(native::split(ones({4}), 0, 0),
                       doctest::Contains("split: split_size 0 can only split a dim of size 0, but dim 0 has size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(native::split(scalar_tensor(1.0), 1, 0),
                       doctest::Contains("split: expected a tensor with at least one dim"), Error);
  CHECK_THROWS_WITH_AS(native::split(ones({4}), 1, 1), doctest::Contains("split: dim 1 out of range"), Error);
}

TEST_CASE("join split_with_sizes: pieces, zero sizes, errors") {
  Tensor x = arange(24.0).view({4, 6}).t();
  auto parts = native::split_with_sizes(x, std::vector<int64_t>{1, 0, 3, 2}, 0);
  REQUIRE(parts.size() == 4);
  int64_t off = 0;
  for (const Tensor& p : parts) {
    CHECK(p.storage() == x.storage());
    CHECK(values(p) == values(x.narrow(0, off, p.size(0))));
    off += p.size(0);
  }
  check_cat(native::cat(parts, 0), parts, 0);
  CHECK(values(native::cat(native::split_with_sizes(x, std::vector<int64_t>{4}, -1), -1)) == values(x));
  CHECK(native::split_with_sizes(zeros({0, 2}), {0, 0}, 0).size() == 2);

  CHECK_THROWS_WITH_AS(native::split_with_sizes(x, std::vector<int64_t>{1, 2}, 0),
                       doctest::Contains("split_with_sizes: sizes [1,2] sum to 3, but dim 0 has size 6 (shape [6,4])"),
                       Error);
  CHECK_THROWS_WITH_AS(native::split_with_sizes(x, std::vector<int64_t>{7, -1}, 0),
                       doctest::Contains("split_with_sizes: sizes must be non-negative, got [7,-1]"), Error);
  CHECK_THROWS_WITH_AS(native::split_with_sizes(scalar_tensor(1.0), {1}, 0),
                       doctest::Contains("split_with_sizes: expected a tensor with at least one dim"), Error);
}

// split and chunk record one node for all their parts, whose backward joins the parts' gradients
// (zeros for a part the loss did not use) into x's gradient.
TEST_CASE("join split: one node for all parts; gradients of used and unused parts, by gradcheck") {
  Tensor x = sample({4, 7}, kF64, 3).requires_grad_();
  auto parts = split(x, 3, 1);  // sizes 3, 3, 1
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].grad_fn() == parts[2].grad_fn());
  CHECK(std::string(parts[0].grad_fn()->name()) == "split");
  // Only parts 0 and 2 reach the loss: the middle columns get zeros.
  sum(parts[0] * 2.0 + 0.0).backward();
  sum(parts[2] * 3.0).backward();
  const std::vector<double> g = values(x.grad());
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 7; ++c) CHECK(g[size_t(r * 7 + c)] == (c < 3 ? 2.0 : c < 6 ? 0.0 : 3.0));
  auto fn = [](const std::vector<Tensor>& in) {
    auto p = split(in[0], std::vector<int64_t>{2, 0, 3}, -1);  // a zero-size part, a negative dim
    auto c = chunk(in[0], 2, 0);
    return sum(p[0] * p[0]) + sum(sin(p[2])) + sum(c[1] * c[1] * c[1]);
  };
  CHECK(autograd::gradcheck(fn, {sample({3, 5}, kF64, 4).requires_grad_()}));
  // A dim of size 0: one empty part, an empty gradient.
  Tensor e = zeros({0, 3}, kF64).requires_grad_();
  auto ep = split(e, 2, 0);
  REQUIRE(ep.size() == 1);
  sum(ep[0]).backward();
  CHECK(e.grad().shape() == Shape({0, 3}));
}
