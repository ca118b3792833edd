// The tensor core: metadata, factories and seeding, every view op, copies and casts between all
// dtypes, item/to_vector, printing, memory statistics and error messages. Values are read back
// through a plain strided loop (tests/support/test_util.h), so no kernel checks itself.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <sstream>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
using V = std::vector<double>;

namespace {

// start, start + 1, ..., start + n - 1.
V iota(int64_t n, double start = 0) {
  V v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// A tensor of `dtype` holding vals, built by memcpy (from_blob), not by the cast kernel.
Tensor typed(const V& vals, DType dtype, const Shape& shape = {}) {
  Shape s = shape.empty() ? Shape{int64_t(vals.size())} : shape;
  return dispatch(dtype, "typed", [&]<class T>() {
    std::vector<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>> buf;  // bool: one byte, 0 or 1
    for (double v : vals) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) buf.push_back(T(float(v)));
      else buf.push_back(T(v));
    }
    return from_blob(buf.data(), s, dtype);
  });
}

bool same_storage(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

}  // namespace

TEST_CASE("tensor: metadata of contiguous, strided, 0-dim and zero-size tensors") {
  Tensor x = zeros({2, 3, 4});
  CHECK(x.shape() == Shape{2, 3, 4});
  CHECK(x.strides() == Shape{12, 4, 1});
  CHECK(x.dim() == 3);
  CHECK(x.numel() == 24);
  CHECK(x.dtype() == kF32);
  CHECK(x.device() == Device::cpu());
  CHECK(x.element_size() == 4);
  CHECK(x.nbytes() == 96);
  CHECK(x.offset() == 0);
  CHECK(x.is_contiguous());
  CHECK(x.is_floating_point());
  CHECK(x.size(-1) == 4);
  CHECK(x.size(0) == 2);
  CHECK(x.stride(-3) == 12);
  CHECK_FALSE(x.transpose(0, 2).is_contiguous());
  CHECK_FALSE(x.slice(2, 0, 4, 2).is_contiguous());
  CHECK(x.select(0, 1).is_contiguous());
  CHECK(x.select(0, 1).offset() == 12);

  // A size-1 dim's stride does not matter for contiguity.
  Tensor y = zeros({3, 1, 4});
  CHECK(make_view(y, {3, 1, 4}, {4, 99, 1}, 0).is_contiguous());
  CHECK_FALSE(make_view(y, {3, 1, 4}, {5, 4, 1}, 0).is_contiguous());

  Tensor s = zeros({});
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.shape().empty());
  CHECK(s.is_contiguous());

  Tensor z = zeros({2, 0, 3});
  CHECK(z.numel() == 0);
  CHECK(z.nbytes() == 0);
  CHECK(z.is_contiguous());

  CHECK(ones({5}, kF16).element_size() == 2);
  CHECK(ones({5}, kBF16).element_size() == 2);
  CHECK(ones({5}, kF64).element_size() == 8);
  CHECK(ones({5}, kI32).element_size() == 4);
  CHECK(ones({5}, kI64).element_size() == 8);
  CHECK(ones({5}, kU8).element_size() == 1);
  CHECK(ones({5}, kBool).element_size() == 1);
  CHECK_FALSE(ones({5}, kI32).is_floating_point());
}

TEST_CASE("tensor: factories fill values and take dtypes") {
  CHECK(values(zeros({2, 2})) == V{0, 0, 0, 0});
  CHECK(values(ones({3}, kI64)) == V{1, 1, 1});
  CHECK(ones({3}, kI64).dtype() == kI64);
  CHECK(values(full({2, 2}, 2.5)) == V{2.5, 2.5, 2.5, 2.5});
  CHECK(values(full({3}, 2.5, kI32)) == V{2, 2, 2});
  CHECK(values(full({2}, -1.5, kF16)) == V{-1.5, -1.5});
  CHECK(values(ones({2}, kBool)) == V{1, 1});
  CHECK(values(zeros({2}, kBool)) == V{0, 0});
  Tensor s = scalar_tensor(3.5);
  CHECK(s.dim() == 0);
  CHECK(values(s) == V{3.5});
  CHECK(scalar_tensor(3.0, kI64).dtype() == kI64);

  Tensor h = full({2, 3}, 7.0, kF16);
  CHECK(zeros_like(h).dtype() == kF16);
  CHECK(zeros_like(h).shape() == Shape{2, 3});
  CHECK(values(zeros_like(h)) == V(6, 0.0));
  CHECK(values(ones_like(h)) == V(6, 1.0));
  CHECK(values(full_like(h, -2)) == V(6, -2.0));
  CHECK(empty_like(h).shape() == Shape{2, 3});
  CHECK(empty_like(h).dtype() == kF16);
  CHECK(empty({0, 5}).numel() == 0);

  Tensor r = ones({2}, TensorOptions(kF32, Device::cpu(), true));
  CHECK(r.requires_grad());
  CHECK_FALSE(ones({2}).requires_grad());
  CHECK_THROWS_WITH_AS(zeros({2}, TensorOptions(kI32, Device::cpu(), true)),
                       doctest::Contains("requires_grad: only floating tensors can require gradients, got i32"),
                       mdl::Error);
}

TEST_CASE("tensor: arange, linspace and eye values") {
  CHECK(arange(5).dtype() == kF32);
  CHECK(values(arange(5)) == V{0, 1, 2, 3, 4});
  CHECK(values(arange(1, 2, 0.25)) == V{1, 1.25, 1.5, 1.75});
  CHECK(values(arange(5, 0, -2)) == V{5, 3, 1});
  CHECK(arange(0, 1, 0.1).numel() == 10);
  CHECK(values(arange(0, 1, 0.1, kF64))[3] == 0.30000000000000004);  // start + i * step, in double
  CHECK(values(arange(0, 10, 3, kI64)) == V{0, 3, 6, 9});
  CHECK(arange(0, 10, 3, kI64).dtype() == kI64);
  CHECK(arange(3, 3).shape() == Shape{0});
  CHECK_THROWS_WITH_AS(arange(0, 1, 0), doctest::Contains("arange: invalid range start=0 end=1 step=0"), mdl::Error);
  CHECK_THROWS_WITH_AS(arange(0, 5, -1), doctest::Contains("arange: step -1 goes the wrong way from 0 to 5"),
                       mdl::Error);

  CHECK(values(linspace(0, 1, 5)) == V{0, 0.25, 0.5, 0.75, 1});
  CHECK(values(linspace(-1, 1, 3, kF64)) == V{-1, 0, 1});
  CHECK(values(linspace(2, 3, 1)) == V{2});
  CHECK(linspace(0, 1, 0).shape() == Shape{0});
  V l = values(linspace(0, 0.3, 4, kF64));
  CHECK(l[3] == 0.3);  // the last value is exactly `end`
  CHECK(l[1] == doctest::Approx(0.1).epsilon(1e-15));
  CHECK(l[2] == doctest::Approx(0.2).epsilon(1e-15));
  CHECK_THROWS_WITH_AS(linspace(0, 1, -1), doctest::Contains("linspace: steps must be non-negative, got -1"),
                       mdl::Error);

  CHECK(eye(3).shape() == Shape{3, 3});
  CHECK(values(eye(3)) == V{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(values(eye(2, kI64)) == V{1, 0, 0, 1});
  CHECK(eye(2, kI64).dtype() == kI64);
  CHECK(eye(0).shape() == Shape{0, 0});
  CHECK_THROWS_WITH_AS(eye(-1), doctest::Contains("eye: n must be non-negative, got -1"), mdl::Error);
}

TEST_CASE("tensor: rand, randn, randint and randperm are reproducible with manual_seed and Generator") {
  manual_seed(7);
  const V a = values(rand({10000}));
  manual_seed(7);
  CHECK(values(rand({10000})) == a);
  const V a_next = values(rand({10000}));
  CHECK(a_next != a);  // the generator moved on
  manual_seed(8);
  CHECK(values(rand({10000})) != a);
  CHECK(*std::min_element(a.begin(), a.end()) >= 0.0);
  CHECK(*std::max_element(a.begin(), a.end()) < 1.0);
  CHECK(std::accumulate(a.begin(), a.end(), 0.0) / double(a.size()) == doctest::Approx(0.5).epsilon(0.02));

  // A fresh Generator with the same seed draws the same numbers; drawing from it leaves the
  // default generator alone.
  Generator g(7);
  CHECK(values(rand({10000}, {}, &g)) == a);
  CHECK(values(rand({10000}, {}, &g)) == a_next);
  g.manual_seed(7);
  CHECK(values(rand({10000}, {}, &g)) == a);
  manual_seed(3);
  const V d1 = values(rand({10}));
  manual_seed(3);
  Generator other(5);
  (void)rand({100}, {}, &other);
  CHECK(values(rand({10})) == d1);

  // Counter-based: two draws of 10 are the first and second halves of one draw of 20.
  manual_seed(11);
  V p = values(rand({10}));
  const V q = values(rand({2, 5}));
  manual_seed(11);
  p.insert(p.end(), q.begin(), q.end());
  CHECK(values(rand({20})) == p);

  // randn: the same draw in f64 and f32 differs only by the final rounding.
  manual_seed(1);
  const V n = values(randn({20000}));
  manual_seed(1);
  CHECK(values(randn({20000})) == n);
  manual_seed(1);
  const V n64 = values(randn({20000}, kF64));
  int64_t rounding_mismatch = 0;
  for (size_t i = 0; i < n.size(); ++i) rounding_mismatch += double(float(n64[i])) != n[i];
  CHECK(rounding_mismatch == 0);
  double mean = 0, var = 0, within = 0;
  for (double v : n) mean += v;
  mean /= double(n.size());
  for (double v : n) {
    var += (v - mean) * (v - mean);
    within += std::abs(v) < 1;
  }
  var /= double(n.size());
  CHECK(std::abs(mean) < 0.03);
  CHECK(std::abs(var - 1.0) < 0.05);
  CHECK(std::abs(within / double(n.size()) - 0.6827) < 0.015);
  CHECK(randn({3}, kF16).dtype() == kF16);

  manual_seed(4);
  Tensor ri = randint(-3, 4, {10000});
  CHECK(ri.dtype() == kI64);
  const V r = values(ri);
  for (int k = -3; k < 4; ++k) CHECK(std::count(r.begin(), r.end(), double(k)) > 1200);
  CHECK(std::count_if(r.begin(), r.end(), [](double v) { return v < -3 || v > 3; }) == 0);
  manual_seed(4);
  CHECK(values(randint(-3, 4, {10000})) == r);
  Generator gi(4);
  CHECK(values(randint(-3, 4, {10000}, kI64, &gi)) == r);
  CHECK(randint(0, 10, {5}, kI32).dtype() == kI32);
  CHECK_THROWS_WITH_AS(randint(5, 5, {2}), doctest::Contains("randint: empty range [5, 5)"), mdl::Error);
  CHECK_THROWS_WITH_AS(rand({2}, kI32), doctest::Contains("rand: expected a floating dtype, got i32"), mdl::Error);
  CHECK_THROWS_WITH_AS(randn({2}, kI64), doctest::Contains("randn: expected a floating dtype, got i64"), mdl::Error);

  manual_seed(9);
  const V perm = values(randperm(50));
  V sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(50));
  CHECK(perm != iota(50));
  manual_seed(9);
  CHECK(values(randperm(50)) == perm);
  manual_seed(10);
  CHECK(values(randperm(50)) != perm);
  Generator g1(21), g2(21);
  CHECK(values(randperm(50, &g1)) == values(randperm(50, &g2)));
  CHECK(randperm(50).dtype() == kI64);
  CHECK(randperm(0).shape() == Shape{0});
  CHECK(values(randperm(1)) == V{0});
  CHECK_THROWS_WITH_AS(randperm(-1), doctest::Contains("randperm: n must be non-negative, got -1"), mdl::Error);
}

TEST_CASE("tensor: random draws do not depend on the thread count") {
  const int saved = get_num_threads();
  set_num_threads(1);
  manual_seed(5);
  const V one = values(randn({200000}));
  const V one_u = values(rand({200000}));
  set_num_threads(2);
  manual_seed(5);
  const V two = values(randn({200000}));
  const V two_u = values(rand({200000}));
  set_num_threads(saved);
  CHECK(one == two);
  CHECK(one_u == two_u);
}

TEST_CASE("tensor: from_vector and from_blob copy values in") {
  Tensor t = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == kF32);
  CHECK(values(t) == V{1, 2, 3, 4, 5, 6});
  CHECK(from_vector<int32_t>({1, 2, 3}).dtype() == kI32);
  CHECK(from_vector<int32_t>({1, 2, 3}).shape() == Shape{3});
  Tensor c = from_vector<double>({1.5, 2.25}, {}, kF32);
  CHECK(c.dtype() == kF32);
  CHECK(values(c) == V{1.5, 2.25});
  CHECK(from_vector<float>({}).shape() == Shape{0});
  CHECK(from_vector<float>({4}).shape() == Shape{1});
  CHECK(values(from_vector<bool>({true, false, true})) == V{1, 0, 1});
  CHECK(values(from_vector<Half>({Half(0.5f), Half(-2.0f)})) == V{0.5, -2});
  CHECK_THROWS_WITH_AS(from_vector<float>({1, 2, 3, 4, 5}, {2, 3}),
                       doctest::Contains("from_vector: 5 values do not fill shape [2,3]"), mdl::Error);

  int32_t buf[6] = {1, -2, 3, -4, 5, -6};
  Tensor b = from_blob(buf, {3, 2}, kI32);
  buf[0] = 100;  // the tensor holds its own copy
  CHECK(b.dtype() == kI32);
  CHECK(b.shape() == Shape{3, 2});
  CHECK(values(b) == V{1, -2, 3, -4, 5, -6});
  CHECK(from_blob(nullptr, {0}).numel() == 0);
  CHECK_THROWS_WITH_AS(from_blob(nullptr, {2}), doctest::Contains("from_blob: null pointer for shape [2]"), mdl::Error);
}

TEST_CASE("tensor: view shares storage; incompatible views throw") {
  Tensor base = arange(24);
  Tensor x = base.view({2, 3, 4});
  CHECK(same_storage(x, base));
  CHECK(x.strides() == Shape{12, 4, 1});
  CHECK(values(x) == iota(24));
  Tensor y = x.view({-1, 4});
  CHECK(y.shape() == Shape{6, 4});
  CHECK(same_storage(y, base));
  CHECK(x.view({4, -1, 2}).shape() == Shape{4, 3, 2});
  CHECK(scalar_tensor(5).view({1, 1}).shape() == Shape{1, 1});
  CHECK(values(scalar_tensor(5).view({1})) == V{5});
  CHECK(full({1}, 2.0).view({}).dim() == 0);
  CHECK(zeros({0, 3}).view({3, 0}).shape() == Shape{3, 0});

  // Non-contiguous, but each run of merged dims is contiguous in memory: still a view.
  Tensor s = x.slice(2, 0, 2);  // (2,3,2), strides (12,4,1)
  Tensor sv = s.view({6, 2});
  CHECK(same_storage(sv, base));
  CHECK(sv.strides() == Shape{4, 1});
  CHECK(values(sv) == values(s));
  CHECK(values(s.view({2, 3, 2, 1})) == values(s));
  Tensor tt = arange(6).view({2, 3}).t();  // (3,2), strides (1,3)
  Tensor tv = tt.view({3, 1, 2});
  CHECK(same_storage(tv, tt));
  CHECK(values(tv) == V{0, 3, 1, 4, 2, 5});

  CHECK_THROWS_WITH_AS(x.transpose(1, 2).view({24}),
                       doctest::Contains("view: shape [24] is not compatible with the strides [12,1,4] of a tensor of "
                                         "shape [2,4,3]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(tt.view({6}), doctest::Contains("view: shape [6] is not compatible"), mdl::Error);
  CHECK_THROWS_WITH_AS(s.view({12}), doctest::Contains("view: shape [12] is not compatible"), mdl::Error);
  CHECK_THROWS_WITH_AS(x.view({5, 5}), doctest::Contains("view: shape [5,5] is invalid for input of size 24"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("view: only one dimension can be -1 in [-1,-1]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(x.view({-1, 5}), doctest::Contains("view: shape [-1,5] is invalid for input of size 24"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(x.view({-2, 12}), doctest::Contains("view: invalid dimension -2"), mdl::Error);
}

TEST_CASE("tensor: reshape is a view when strides allow, else a copy") {
  Tensor x = arange(12).view({3, 4});
  Tensor r = x.reshape({4, 3});
  CHECK(same_storage(r, x));
  CHECK(values(r) == iota(12));
  CHECK(x.reshape({-1}).shape() == Shape{12});
  Tensor c = x.t().reshape({12});
  CHECK_FALSE(same_storage(c, x));
  CHECK(c.is_contiguous());
  CHECK(values(c) == V{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor c2 = x.t().reshape({2, 6});
  CHECK(values(c2) == V{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // A copy made by reshape is independent of the source.
  c.fill_(-1);
  CHECK(values(x) == iota(12));
  CHECK_THROWS_WITH_AS(x.reshape({5}), doctest::Contains("reshape: shape [5] is invalid for input of size 12"),
                       mdl::Error);
}

TEST_CASE("tensor: flatten, permute and transpose") {
  Tensor x = arange(24).view({2, 3, 4});
  CHECK(x.flatten().shape() == Shape{24});
  CHECK(same_storage(x.flatten(), x));
  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(x.flatten(-2, -1).shape() == Shape{2, 12});
  CHECK(x.flatten(1, 1).shape() == Shape{2, 3, 4});
  CHECK(scalar_tensor(1).flatten().shape() == Shape{1});
  // A 0-d tensor has dims 0 and -1 only, as in PyTorch: nn::Flatten()'s start_dim 1 is out of range.
  CHECK(scalar_tensor(1).flatten(-1, 0).shape() == Shape{1});
  CHECK_THROWS_WITH_AS(scalar_tensor(1).flatten(1), doctest::Contains("flatten: dim 1 out of range"), mdl::Error);
  CHECK_THROWS_WITH_AS(scalar_tensor(1).flatten(0, 1), doctest::Contains("flatten: dim 1 out of range"), mdl::Error);
  CHECK_THROWS_AS(nn::Flatten()(scalar_tensor(1)), mdl::Error);
  CHECK(nn::Flatten(0)(scalar_tensor(1)).shape() == Shape{1});
  CHECK_THROWS_WITH_AS(x.flatten(2, 1), doctest::Contains("flatten: start_dim 2 comes after end_dim 1"), mdl::Error);

  Tensor p = x.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(same_storage(p, x));
  V want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) want.push_back(i * 12 + j * 4 + k);
  CHECK(values(p) == want);
  CHECK(values(x.permute({-1, 0, 1})) == want);
  CHECK(values(p.flatten()) == want);  // flatten of a permuted tensor copies in its order
  CHECK_THROWS_WITH_AS(x.permute({0, 1}), doctest::Contains("permute: 2 dims given for a tensor of shape [2,3,4]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 0, 1}), doctest::Contains("permute: dim 0 repeated in [0,0,1]"), mdl::Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 3}), doctest::Contains("permute: dim 3 out of range for a tensor of 3 dims"),
                       mdl::Error);

  Tensor t = x.transpose(0, 2);
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.strides() == Shape{1, 4, 12});
  CHECK(values(x.transpose(-1, -3)) == values(t));
  want.clear();
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) want.push_back(i * 12 + j * 4 + k);
  CHECK(values(t) == want);
  Tensor m = arange(6).view({2, 3});
  CHECK(values(m.t()) == V{0, 3, 1, 4, 2, 5});
  CHECK(m.t().t().strides() == m.strides());
  CHECK(scalar_tensor(2).transpose(0, 0).dim() == 0);
  CHECK_THROWS_WITH_AS(x.t(), doctest::Contains("t: expected a 2-D tensor, got shape [2,3,4]"), mdl::Error);
  CHECK_THROWS_WITH_AS(x.transpose(0, 5), doctest::Contains("transpose: dim 5 out of range for a tensor of 3 dims"),
                       mdl::Error);
}

TEST_CASE("tensor: slice with steps and negative or clamped bounds, narrow, select") {
  Tensor a = arange(10);
  Tensor s = a.slice(0, 1, 8, 3);
  CHECK(values(s) == V{1, 4, 7});
  CHECK(s.stride(0) == 3);
  CHECK(s.offset() == 1);
  CHECK(same_storage(s, a));
  CHECK(values(a.slice(0, -3, 100)) == V{7, 8, 9});
  CHECK(values(a.slice(0, -100, 2)) == V{0, 1});
  CHECK(values(a.slice(0, 2, 9, 4)) == V{2, 6});
  CHECK(values(a.slice(0, 0, 10, 20)) == V{0});
  CHECK(values(a.slice(0, -1, 10)) == V{9});
  CHECK(a.slice(0, 5, 2).shape() == Shape{0});
  CHECK(a.slice(0, 10, 20).shape() == Shape{0});
  CHECK_THROWS_WITH_AS(a.slice(0, 0, 5, 0), doctest::Contains("slice: step must be positive, got 0"), mdl::Error);
  CHECK_THROWS_WITH_AS(a.slice(0, 0, 5, -1), doctest::Contains("slice: step must be positive, got -1"), mdl::Error);
  CHECK_THROWS_WITH_AS(a.slice(1, 0, 5), doctest::Contains("slice: dim 1 out of range for a tensor of 1 dims"),
                       mdl::Error);

  Tensor m = arange(20).view({4, 5});
  Tensor ms = m.slice(1, 1, 5, 2);
  CHECK(ms.shape() == Shape{4, 2});
  CHECK(values(ms) == V{1, 3, 6, 8, 11, 13, 16, 18});
  CHECK(values(ms.slice(0, 1, 4, 2)) == V{6, 8, 16, 18});
  CHECK(values(m.slice(-1, -2, 5)) == V{3, 4, 8, 9, 13, 14, 18, 19});

  CHECK(values(m.narrow(1, 1, 2)) == V{1, 2, 6, 7, 11, 12, 16, 17});
  CHECK(values(m.narrow(0, -2, 2)) == V{10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(m.narrow(1, 5, 0).shape() == Shape{4, 0});
  CHECK(same_storage(m.narrow(1, 1, 2), m));
  CHECK_THROWS_WITH_AS(m.narrow(1, 3, 5),
                       doctest::Contains("narrow: start 3 and length 5 out of range for dim 1 of size 5 (shape [4,5])"),
                       mdl::Error);

  Tensor r = m.select(0, 2);
  CHECK(r.shape() == Shape{5});
  CHECK(values(r) == V{10, 11, 12, 13, 14});
  CHECK(values(m.select(1, -1)) == V{4, 9, 14, 19});
  CHECK(a.select(0, 3).dim() == 0);
  CHECK(values(a.select(0, -10)) == V{0});
  CHECK_THROWS_WITH_AS(m.select(0, 4), doctest::Contains("select: index 4 out of range for dim 0 of size 4"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(m.select(0, -5), doctest::Contains("select: index -5 out of range for dim 0 of size 4"),
                       mdl::Error);
}

TEST_CASE("tensor: squeeze, unsqueeze and expand") {
  Tensor z = arange(6).view({1, 3, 1, 2});
  CHECK(z.squeeze().shape() == Shape{3, 2});
  CHECK(z.squeeze(2).shape() == Shape{1, 3, 2});
  CHECK(z.squeeze(-2).shape() == Shape{1, 3, 2});
  CHECK(z.squeeze(1).shape() == Shape{1, 3, 1, 2});
  CHECK(z.squeeze(0).shape() == Shape{3, 1, 2});
  CHECK(values(z.squeeze()) == iota(6));
  CHECK(same_storage(z.squeeze(), z));
  CHECK(ones({1, 1}).squeeze().dim() == 0);
  CHECK(scalar_tensor(1).squeeze(0).dim() == 0);

  Tensor m = arange(6).view({2, 3});
  CHECK(m.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(m.unsqueeze(1).shape() == Shape{2, 1, 3});
  CHECK(m.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(m.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK(m.unsqueeze(1).is_contiguous());
  CHECK(values(m.t().unsqueeze(1)) == V{0, 3, 1, 4, 2, 5});
  CHECK(scalar_tensor(4).unsqueeze(0).shape() == Shape{1});
  CHECK_THROWS_WITH_AS(m.unsqueeze(3), doctest::Contains("unsqueeze: dim 3 out of range for a tensor of 3 dims"),
                       mdl::Error);

  Tensor c = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor e = c.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(same_storage(e, c));
  V want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(j + 1);
  CHECK(values(e) == want);
  CHECK(values(e.contiguous()) == want);
  CHECK(e.contiguous().is_contiguous());
  CHECK(c.expand({-1, 4}).shape() == Shape{3, 4});
  CHECK(c.expand_as(zeros({5, 3, 2})).shape() == Shape{5, 3, 2});
  Tensor se = scalar_tensor(2).expand({2, 2});
  CHECK(se.strides() == Shape{0, 0});
  CHECK(values(se) == V{2, 2, 2, 2});
  CHECK_THROWS_WITH_AS(c.expand({2, 4, 4}),
                       doctest::Contains("expand: the size 3 of dim 0 of shape [3,1] cannot be expanded to [2,4,4]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(c.expand({4}), doctest::Contains("expand: cannot expand shape [3,1] to [4] (fewer dims)"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(c.expand({-1, 3, 4}), doctest::Contains("expand: -1 or a negative size -1 is not allowed"),
                       mdl::Error);
}

TEST_CASE("tensor: contiguous and clone") {
  Tensor x = arange(6).view({2, 3});
  CHECK(x.contiguous().is_same(x));
  Tensor c = x.t().contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(same_storage(c, x));
  CHECK(c.shape() == Shape{3, 2});
  CHECK(values(c) == V{0, 3, 1, 4, 2, 5});

  Tensor k = x.clone();
  CHECK_FALSE(same_storage(k, x));
  CHECK(values(k) == values(x));
  k.fill_(9);
  CHECK(values(x) == iota(6));
  Tensor kt = x.t().clone();
  CHECK(kt.is_contiguous());
  CHECK(values(kt) == V{0, 3, 1, 4, 2, 5});
  Tensor h = typed({1.5, -0.25, 65504}, kF16);
  CHECK(values(h.clone()) == V{1.5, -0.25, 65504});
  CHECK(h.clone().dtype() == kF16);
  CHECK(zeros({0, 4}).clone().shape() == Shape{0, 4});
}

TEST_CASE("tensor: copy_ broadcasts, casts, writes through views and handles overlap") {
  Tensor d = zeros({2, 3});
  d.copy_(from_vector<float>({1, 2, 3}));
  CHECK(values(d) == V{1, 2, 3, 1, 2, 3});
  d.copy_(from_vector<float>({7, 8}, {2, 1}));
  CHECK(values(d) == V{7, 7, 7, 8, 8, 8});
  d.copy_(scalar_tensor(4, kI64));
  CHECK(values(d) == V(6, 4.0));
  d.copy_(from_vector<int64_t>({1, -2, 3, -4, 5, -6}, {2, 3}));
  CHECK(d.dtype() == kF32);
  CHECK(values(d) == V{1, -2, 3, -4, 5, -6});
  Tensor d16 = zeros({3}, kF16);
  d16.copy_(from_vector<double>({0.1, 1e6, -2.5}));
  CHECK(values(d16) == V{double(float(Half(0.1f))), HUGE_VAL, -2.5});

  // Into an expanded view (stride 0): its elements share memory, so there is no defined result.
  Tensor row = zeros({3});
  CHECK_THROWS_WITH_AS(row.unsqueeze(0).expand({4, 3}).copy_(arange(12).view({4, 3})),
                       doctest::Contains("has stride 0 in dimension 0"), Error);
  CHECK_THROWS_WITH_AS(row.unsqueeze(0).expand({4, 3}).add_(ones({4, 3})), doctest::Contains("stride 0"), Error);
  CHECK(values(row) == V{0, 0, 0});

  // Into a transposed view and into a stepped slice: the base sees the writes in place.
  Tensor m = zeros({3, 4});
  m.t().copy_(arange(12).view({4, 3}));
  V want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) want.push_back(3 * j + i);
  CHECK(values(m) == want);
  Tensor v = zeros({10});
  v.slice(0, 1, 10, 3).copy_(from_vector<float>({7, 8, 9}));
  CHECK(values(v) == V{0, 7, 0, 0, 8, 0, 0, 9, 0, 0});

  // Source and destination sharing memory read the source as it was before the copy.
  Tensor sq = arange(9).view({3, 3});
  sq.copy_(sq.t());
  CHECK(values(sq) == V{0, 3, 6, 1, 4, 7, 2, 5, 8});
  Tensor big = arange(512 * 512).view({512, 512});  // large enough to be split over threads
  big.copy_(big.t());
  V bv = values(big);
  int64_t bad = 0;
  for (int64_t i = 0; i < 512; ++i)
    for (int64_t j = 0; j < 512; ++j) bad += bv[size_t(i * 512 + j)] != double(j * 512 + i);
  CHECK(bad == 0);
  Tensor a = arange(10);
  a.slice(0, 1, 10).copy_(a.slice(0, 0, 9));
  CHECK(values(a) == V{0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  Tensor b = arange(10);
  b.slice(0, 0, 9).copy_(b.slice(0, 1, 10));
  CHECK(values(b) == V{1, 2, 3, 4, 5, 6, 7, 8, 9, 9});
  Tensor same = arange(4);
  same.copy_(same);
  CHECK(values(same) == V{0, 1, 2, 3});

  const uint64_t ver = d.version();
  d.copy_(ones({2, 3}));
  CHECK(d.version() > ver);
  zeros({0, 3}).copy_(ones({3}));  // nothing to copy, no error

  CHECK_THROWS_WITH_AS(zeros({2, 3}).copy_(zeros({4})),
                       doctest::Contains("copy_: shapes [4] and [2,3] cannot be broadcast together"), mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({2, 3}).copy_(zeros({2, 1, 3})),
                       doctest::Contains("copy_: source shape [2,1,3] cannot be broadcast to destination shape [2,3]"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({2}).copy_(Tensor()), doctest::Contains("copy_: undefined tensor"), mdl::Error);
}

TEST_CASE("tensor: to(dtype) between every pair of dtypes, contiguous and strided") {
  const DType all[] = {kF32, kF16, kBF16, kF64, kI32, kI64, kU8, kBool};
  const V nums = {0, 1, 2, 3, 7, 100, 255, 1};  // exact in every non-bool dtype
  for (DType from : all) {
    V src_vals = nums;
    if (from == kBool)
      for (double& x : src_vals) x = x != 0 && x != 2 ? 1 : 0;  // some zeros, some ones
    Tensor src = typed(src_vals, from, {2, 4});
    CHECK(src.to(from).is_same(src));
    for (DType to : all) {
      INFO("from ", std::string(dtype_name(from)), " to ", std::string(dtype_name(to)));
      V want = src_vals;
      if (to == kBool)
        for (double& x : want) x = x != 0 ? 1 : 0;
      Tensor out = src.to(to);
      CHECK(out.dtype() == to);
      CHECK(out.shape() == Shape{2, 4});
      CHECK(values(out) == want);
      // Transposed source: the per-element (strided) path.
      Tensor tout = src.t().to(to);
      V twant;
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 2; ++i) twant.push_back(want[size_t(i * 4 + j)]);
      CHECK(tout.is_contiguous() == (from != to));  // to() of the same dtype returns the view itself
      CHECK(values(tout) == twant);
    }
  }
  // Fractions, negatives and -0 where the dtypes hold them.
  CHECK(values(typed({-2.5, 0.375, -0.0}, kF32).to(kF64)) == V{-2.5, 0.375, 0});
  CHECK(values(typed({-2.5, 0.375}, kF64).to(kBF16)) == V{-2.5, 0.375});
  CHECK(values(typed({-2.5, 0.5, -0.0}, kF32).to(kBool)) == V{1, 1, 0});
  CHECK(values(typed({-7, 300}, kI64).to(kF16)) == V{-7, 300});
  CHECK(values(typed({16777217, 16777219}, kI64).to(kF32)) == V{16777216, 16777220});  // to nearest even
  CHECK(values(typed({65504, 65519, 65520, 70000, -70000, 2049}, kI32).to(kF16)) ==
        V{65504, 65504, HUGE_VAL, HUGE_VAL, -HUGE_VAL, 2048});
}

TEST_CASE("tensor: float to integer casts saturate and NaN becomes 0") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = HUGE_VAL;
  const auto i32max = std::numeric_limits<int32_t>::max(), i32min = std::numeric_limits<int32_t>::min();
  const auto i64max = std::numeric_limits<int64_t>::max(), i64min = std::numeric_limits<int64_t>::min();
  for (DType from : {kF32, kF64}) {
    Tensor x = typed({1e10, -1e10, nan, inf, -inf, 2.7, -2.7, 0.0}, from);
    Tensor i32 = x.to(kI32);
    CHECK(std::vector<int32_t>(i32.data_ptr<int32_t>(), i32.data_ptr<int32_t>() + 8) ==
          std::vector<int32_t>{i32max, i32min, 0, i32max, i32min, 2, -2, 0});
    Tensor i64 = x.to(kI64);
    CHECK(std::vector<int64_t>(i64.data_ptr<int64_t>(), i64.data_ptr<int64_t>() + 8) ==
          std::vector<int64_t>{10000000000, -10000000000, 0, i64max, i64min, 2, -2, 0});
    CHECK(values(x.to(kU8)) == V{255, 0, 0, 255, 0, 2, 0, 0});
    CHECK(values(x.to(kBool)) == V{1, 1, 1, 1, 1, 1, 1, 0});
    // The same through a strided source.
    CHECK(values(x.slice(0, 0, 8, 2).to(kI32)) == V{double(i32max), 0, double(i32min), -2});
  }
  Tensor big = typed({1e300, -1e300, 3e9, -3e9}, kF64).to(kI64);
  CHECK(std::vector<int64_t>(big.data_ptr<int64_t>(), big.data_ptr<int64_t>() + 4) ==
        std::vector<int64_t>{i64max, i64min, 3000000000, -3000000000});
  for (DType from : {kF16, kBF16}) {
    Tensor h = typed({inf, -inf, nan, 256, -300}, from);
    CHECK(values(h.to(kI32)) == V{double(i32max), double(i32min), 0, 256, -300});
    CHECK(values(h.to(kU8)) == V{255, 0, 0, 255, 0});
    CHECK(values(h.to(kI64)) == V{double(i64max), double(i64min), 0, 256, -300});
  }
}

TEST_CASE("tensor: item and to_vector") {
  CHECK(from_vector<float>({3.5f}).item<float>() == 3.5f);
  CHECK(from_vector<float>({3.5f}).item<double>() == 3.5);
  CHECK(from_vector<float>({3.7f}).item<int64_t>() == 3);
  CHECK(scalar_tensor(-2.5).item<int32_t>() == -2);
  CHECK(scalar_tensor(0.0).item<bool>() == false);
  CHECK(scalar_tensor(1.0, kF16).item<Half>().bits == 0x3c00);
  CHECK(ones({1, 1, 1}, kI64).item<int64_t>() == 1);
  CHECK(arange(10).slice(0, 7, 8).item<float>() == 7.0f);
  CHECK_THROWS_WITH_AS(zeros({2}).item<float>(),
                       doctest::Contains("item: expected a tensor with one element, got shape [2]"), mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({0}).item<float>(),
                       doctest::Contains("item: expected a tensor with one element, got shape [0]"), mdl::Error);

  CHECK(arange(6).view({2, 3}).t().to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(from_vector<float>({1.5f, -1.5f}).to_vector<int64_t>() == std::vector<int64_t>{1, -1});
  CHECK(from_vector<int32_t>({0, 5}).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(zeros({0, 3}).to_vector<float>().empty());
  CHECK(scalar_tensor(2).to_vector<double>() == std::vector<double>{2});
  CHECK(from_vector<float>({1, 2}).expand({2, 2}).to_vector<float>() == std::vector<float>{1, 2, 1, 2});
}

TEST_CASE("tensor: str prints the values like PyTorch") {
  CHECK(from_vector<float>({1, 2.5f, -3}).str() == "tensor([1, 2.5, -3], dtype=f32)");
  CHECK(arange(4).view({2, 2}).str() == "tensor([[0, 1],\n        [2, 3]], dtype=f32)");
  CHECK(arange(8).view({2, 2, 2}).str() ==
        "tensor([[[0, 1],\n         [2, 3]],\n        [[4, 5],\n         [6, 7]]], dtype=f32)");
  CHECK(arange(4).view({2, 2}).t().str() == "tensor([[0, 2],\n        [1, 3]], dtype=f32)");
  CHECK(from_vector<int64_t>({1, -2, 3}).str() == "tensor([1, -2, 3], dtype=i64)");
  CHECK(scalar_tensor(2.5).str() == "tensor(2.5, dtype=f32)");
  CHECK(from_vector<double>({1.0 / 3}).str() == "tensor([0.33333], dtype=f64)");
  CHECK(from_vector<float>({NAN, INFINITY, -INFINITY}).str() == "tensor([nan, inf, -inf], dtype=f32)");
  CHECK(from_vector<Half>({Half(1.5f)}).str() == "tensor([1.5], dtype=f16)");
  CHECK(zeros({0}).str() == "tensor([], dtype=f32)");
  CHECK(arange(100).str() == "tensor([0, 1, 2, ..., 97, 98, 99], dtype=f32)");
  CHECK(arange(200).view({100, 2}).str() ==
        "tensor([[0, 1],\n        [2, 3],\n        [4, 5],\n        ...,\n        [194, 195],\n        [196, 197],\n"
        "        [198, 199]], dtype=f32)");
  CHECK(ones({1}, TensorOptions(kF32, Device::cpu(), true)).str() == "tensor([1], dtype=f32, requires_grad=true)");
  CHECK(Tensor().str() == "tensor(undefined)");
  std::ostringstream os;
  os << from_vector<int32_t>({4});
  CHECK(os.str() == "tensor([4], dtype=i32)");
}

TEST_CASE("tensor: memory_stats live bytes go up and back down, peak holds the high-water mark") {
  const MemoryStats s0 = memory_stats();
  {
    Tensor t = empty({1000}, kF64);
    const MemoryStats s1 = memory_stats();
    CHECK(s1.live_bytes == s0.live_bytes + 8000);
    CHECK(s1.live_blocks == s0.live_blocks + 1);
    CHECK(s1.allocations == s0.allocations + 1);
    CHECK(s1.peak_bytes >= s1.live_bytes);
    Tensor v = t.view({10, 100}).t();  // views allocate nothing
    CHECK(memory_stats().live_bytes == s1.live_bytes);
    CHECK(memory_stats().allocations == s1.allocations);
  }
  CHECK(memory_stats().live_bytes == s0.live_bytes);
  CHECK(memory_stats().live_blocks == s0.live_blocks);

  reset_peak_memory();
  CHECK(memory_stats().peak_bytes == memory_stats().live_bytes);
  const int64_t base = memory_stats().live_bytes;
  {
    Tensor a = empty({1 << 20});        // 4 MiB
    Tensor b = empty({1 << 19}, kF16);  // 1 MiB
    CHECK(memory_stats().live_bytes == base + (5 << 20));
  }
  CHECK(memory_stats().live_bytes == base);
  CHECK(memory_stats().peak_bytes == base + (5 << 20));
  reset_peak_memory();
  CHECK(memory_stats().peak_bytes == base);
}

TEST_CASE("tensor: fill_ and in-place arithmetic write through views") {
  Tensor m = zeros({4, 5});
  m.slice(1, 0, 5, 2).fill_(7);
  V want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) want.push_back(j % 2 == 0 ? 7 : 0);
  CHECK(values(m) == want);
  const uint64_t ver = m.version();
  m.t().zero_();
  CHECK(values(m) == V(20, 0.0));
  CHECK(m.version() > ver);
  CHECK(values(full({3}, 1e6, kF16)) == V(3, HUGE_VAL));
  CHECK(values(full({2}, 255, kU8)) == V(2, 255));
  CHECK_THROWS_WITH_AS(full({2}, 300, kU8), doctest::Contains("300 cannot be converted to u8"), Error);

  Tensor a = ones({2, 3});
  a.add_(from_vector<float>({1, 2, 3}), 2.0);
  CHECK(values(a) == V{3, 5, 7, 3, 5, 7});
  a.sub_(ones({3}));
  CHECK(values(a) == V{2, 4, 6, 2, 4, 6});
  a.mul_(0.5);
  CHECK(values(a) == V{1, 2, 3, 1, 2, 3});
  a.mul_(from_vector<float>({2, -1}, {2, 1}));
  CHECK(values(a) == V{2, 4, 6, -1, -2, -3});
  a.div_(from_vector<float>({2, 4, 6}));
  CHECK(values(a) == V{1, 1, 1, -0.5, -0.5, -0.5});
  Tensor base = arange(6).view({2, 3});
  Tensor col2 = base.select(1, 1);
  col2.add_(full({2}, 10));
  CHECK(values(base) == V{0, 11, 2, 3, 14, 5});
  CHECK_THROWS_WITH_AS(ones({3}).add_(ones({2, 3})),
                       doctest::Contains("copy_: source shape [2,3] cannot be broadcast to destination shape [3]"),
                       mdl::Error);
}

TEST_CASE("tensor: errors name the op, the shapes and the dtypes") {
  CHECK_THROWS_WITH_AS(Tensor().shape(), doctest::Contains("tensor: use of an undefined tensor"), mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({2, -1}), doctest::Contains("tensor: negative dimension in shape [2,-1]"), mdl::Error);
  CHECK_THROWS_WITH_AS(zeros({2}).data_ptr<double>(),
                       doctest::Contains("data_ptr: tensor has dtype f32, asked for f64"), mdl::Error);
  Tensor x = zeros({2, 3, 4});
  CHECK_THROWS_WITH_AS(x.size(3), doctest::Contains("size: dim 3 out of range for a tensor of 3 dims (expected -3..2)"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(x.stride(-4), doctest::Contains("stride: dim -4 out of range for a tensor of 3 dims"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(set_num_threads(0), doctest::Contains("set_num_threads: need at least 1 thread, got 0"),
                       mdl::Error);
  if (!cuda::is_available())
    CHECK_THROWS_WITH_AS(x.to(Device::cuda()), doctest::Contains("allocate: device cuda:0 is not available"),
                         mdl::Error);
}
