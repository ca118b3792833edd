// where, masked_fill, index_select, index_add, gather, scatter_add, tril/triu and one_hot against
// plain loops over coordinates: broadcast shapes, non-contiguous inputs, zero-size and 0-dim
// tensors, several dtypes, inputs large enough to thread, and every error path.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "tensor/parallel.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

const DType kTypes[] = {kF32, kF64, kF16, kI64, kBool};

// Small integers (0/1 for bool), exact in every dtype, so results compare exactly.
Tensor rnd(const Shape& s, DType t, int64_t lo = -8, int64_t hi = 8) {
  if (t == kBool) return randint(0, 2, s, kI64).to(kBool);
  return randint(lo, hi, s, kI64).to(t);
}

// The same values as x, laid out with a step of 2 along the last dim (not contiguous).
Tensor sliced(const Tensor& x) {
  if (x.dim() == 0) return x;
  Shape s = x.shape();
  s.back() *= 2;
  Tensor v = zeros(s, x.dtype()).slice(-1, 0, s.back(), 2);
  v.copy_(x);
  return v;
}

// The same values as x, laid out with the first and last dims swapped in memory.
Tensor transposed(const Tensor& x) {
  return x.dim() < 2 ? sliced(x) : x.transpose(0, -1).contiguous().transpose(0, -1);
}

// Flat index into shape s of coordinate c of the broadcast shape (trailing alignment, size-1 dims read 0).
int64_t bcast_index(const Shape& c, const Shape& s) {
  int64_t i = 0;
  size_t off = c.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + (s[d] == 1 ? 0 : c[off + d]);
  return i;
}

// Runs f with one thread, then with the default count, and checks the results are bit-identical.
template <class F>
void check_thread_independent(F f) {
  int threads = get_num_threads();
  set_num_threads(1);
  Tensor one = f();
  set_num_threads(threads);
  Tensor many = f();
  CHECK(values(one) == values(many));
}

}  // namespace

// ---- where / masked_fill --------------------------------------------------------------------
TEST_CASE("index where: broadcast, promotion and strides against a loop") {
  manual_seed(1);
  for (DType ta : kTypes)
    for (DType tb : {kF32, kI64, kF16}) {
      CAPTURE(ta);
      CAPTURE(tb);
      Tensor cond = rnd({3, 1, 4}, kBool);
      Tensor a = transposed(rnd({1, 5, 4}, ta));
      Tensor b = sliced(rnd({4}, tb));
      Tensor out = where(cond, a, b);
      CHECK(out.shape() == Shape{3, 5, 4});
      CHECK(out.dtype() == promote_types(ta, tb));
      auto c = values(cond), av = values(a), bv = values(b), o = values(out);
      std::vector<double> want(o.size());
      for (int64_t i = 0; i < out.numel(); ++i) {
        Shape co = unravel(i, out.shape());
        want[size_t(i)] = c[size_t(bcast_index(co, cond.shape()))] ? av[size_t(bcast_index(co, a.shape()))]
                                                                   : bv[size_t(bcast_index(co, b.shape()))];
      }
      CHECK(o == want);
    }
}

TEST_CASE("index where: large, 0-dim and zero-size") {
  manual_seed(2);
  Tensor cond = rnd({300, 257}, kBool).t();
  Tensor a = randn({257, 300}), b = randn({300, 257}, kF64).t();
  Tensor out = where(cond, a, b);
  auto c = values(cond), av = values(a), bv = values(b), o = values(out);
  bool ok = true;
  for (size_t i = 0; i < o.size(); ++i) ok &= o[i] == (c[i] ? double(float(av[i])) : bv[i]);
  CHECK(ok);
  Tensor c2 = rnd({1000, 70}, kBool), a2 = randn({1000, 70}), b2 = randn({1000, 70});
  auto cv = values(c2), a2v = values(a2), b2v = values(b2), o2 = values(where(c2, a2, b2));
  for (size_t i = 0; i < o2.size(); ++i) ok &= o2[i] == (cv[i] ? a2v[i] : b2v[i]);
  CHECK(ok);

  Tensor s = where(full({}, 1.0, kBool), scalar_tensor(2.0), scalar_tensor(3.0));
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 2.0f);
  CHECK(where(zeros({0, 3}, kBool), ones({3}), zeros({1, 3})).shape() == Shape{0, 3});
  CHECK(values(where(zeros({2}, kBool), scalar_tensor(1.0), scalar_tensor(5.0))) == std::vector<double>{5, 5});
}

TEST_CASE("index where: errors") {
  CHECK_THROWS_WITH_AS(where(ones({3}), ones({3}), ones({3})),
                       doctest::Contains("where: condition must be bool, got f32"), Error);
  CHECK_THROWS_WITH_AS(where(ones({3}, kBool), ones({4}), ones({3})),
                       doctest::Contains("where: condition shape [3] and value shapes [4] and [3] cannot be broadcast"),
                       Error);
}

TEST_CASE("index masked_fill: broadcast masks, strides and dtypes") {
  manual_seed(3);
  for (DType t : kTypes) {
    CAPTURE(t);
    Tensor x0 = rnd({4, 5}, t);
    for (Shape ms : {Shape{5}, Shape{4, 1}, Shape{4, 5}, Shape{}})
      for (bool contiguous : {false, true}) {
        CAPTURE(shape_str(ms));
        CAPTURE(contiguous);
        Tensor x = contiguous ? x0 : transposed(x0);
        Tensor mask = contiguous ? rnd(ms, kBool) : sliced(rnd(ms, kBool));
        Tensor out = masked_fill(x, mask, 1.0);
        CHECK(out.shape() == x.shape());
        CHECK(out.dtype() == t);
        auto xv = values(x), mv = values(mask), o = values(out);
        std::vector<double> want(o.size());
        for (int64_t i = 0; i < x.numel(); ++i)
          want[size_t(i)] = mv[size_t(bcast_index(unravel(i, x.shape()), ms))] ? 1.0 : xv[size_t(i)];
        CHECK(o == want);
      }
  }
  CHECK(values(masked_fill(from_vector<float>({1, 2}), from_vector<bool>({true, false}), -2.5)) ==
        std::vector<double>{-2.5, 2});
  CHECK(masked_fill(zeros({0, 2}), ones({2}, kBool), 1.0).shape() == Shape{0, 2});
}

TEST_CASE("index masked_fill: errors") {
  CHECK_THROWS_WITH_AS(masked_fill(ones({3}), ones({3}), 0.0),
                       doctest::Contains("masked_fill: mask must be bool, got f32"), Error);
  CHECK_THROWS_WITH_AS(
      masked_fill(ones({3}), ones({2, 3}, kBool), 0.0),
      doctest::Contains("masked_fill: mask of shape [2,3] cannot be broadcast to the input's shape [3]"), Error);
  CHECK_THROWS_WITH_AS(masked_fill(ones({3}), ones({4}, kBool), 0.0),
                       doctest::Contains("masked_fill: mask of shape [4] cannot be broadcast"), Error);
}

// ---- index_select / index_add ----------------------------------------------------------------
namespace {
void check_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = index_select(x, dim, index);
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  Shape want_shape = x.shape();
  want_shape[size_t(d)] = index.numel();
  REQUIRE(out.shape() == want_shape);
  CHECK(out.dtype() == x.dtype());
  auto xv = values(x), iv = values(index), o = values(out);
  std::vector<double> want(o.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape c = unravel(i, out.shape());
    c[size_t(d)] = int64_t(iv[size_t(c[size_t(d)])]);
    want[size_t(i)] = xv[size_t(ravel(c, x.shape()))];
  }
  CHECK(o == want);
}
}  // namespace

TEST_CASE("index index_select: against a loop") {
  manual_seed(4);
  for (DType t : kTypes) {
    CAPTURE(t);
    Tensor x = rnd({4, 6, 5}, t);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      CAPTURE(dim);
      int64_t n = x.size(dim);
      check_index_select(x, dim, randint(0, n, {7}));
      check_index_select(transposed(x), dim, sliced(randint(0, n, {3})));
      check_index_select(sliced(x), dim, randint(0, n, {2}, kI32));
      check_index_select(x, dim, zeros({0}, kI64));
      check_index_select(x, dim, full({}, double(n - 1), kI64));
    }
  }
  check_index_select(from_vector<float>({1, 2, 3}), 0, from_vector<int64_t>({2, 2, 0, 1, 2}));
  check_index_select(zeros({0, 3}), 1, from_vector<int64_t>({2, 0}));
  // Large enough to thread: many short rows, and few long ones.
  check_index_select(randn({1000, 64}), 0, randint(0, 1000, {700}));
  check_index_select(randn({3, 40000}, kF64).t(), 1, from_vector<int64_t>({2, 0, 2}));
  // 0-dim input: one index, which must be 0.
  Tensor s = index_select(scalar_tensor(4.0), 0, from_vector<int64_t>({0}));
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 4.0f);
}

TEST_CASE("index index_select: errors") {
  Tensor x = ones({5, 3});
  CHECK_THROWS_WITH_AS(index_select(x, 0, from_vector<int64_t>({1, 5})),
                       doctest::Contains("index_select: index 5 is out of range for dim 0 with size 5"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 1, from_vector<int32_t>({-1})),
                       doctest::Contains("index_select: index -1 is out of range for dim 1 with size 3"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, from_vector<float>({1})),
                       doctest::Contains("index_select: index must be I64 or I32, got f32"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, zeros({2, 2}, kI64)),
                       doctest::Contains("index_select: index must be 1-D, got shape [2,2]"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 2, zeros({1}, kI64)), doctest::Contains("index_select: dim 2 out of range"),
                       Error);
  CHECK_THROWS_WITH_AS(index_select(scalar_tensor(1.0), 0, zeros({2}, kI64)),
                       doctest::Contains("index_select: the index into a 0-dim tensor must hold one value, got 2"),
                       Error);
}

namespace {
void check_index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = native::index_add(x, dim, index, src);
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  REQUIRE(out.shape() == x.shape());
  CHECK(out.dtype() == x.dtype());
  auto xv = values(x), iv = values(index), sv = values(src), o = values(out);
  std::vector<double> want = xv;
  for (int64_t i = 0; i < src.numel(); ++i) {
    Shape c = unravel(i, src.shape());
    c[size_t(d)] = int64_t(iv[size_t(c[size_t(d)])]);
    double& w = want[size_t(ravel(c, x.shape()))];
    w = x.dtype() == kBool ? double(w || sv[size_t(i)]) : w + sv[size_t(i)];
  }
  CHECK(o == want);
}
}  // namespace

TEST_CASE("index index_add: 16-bit floats are summed in f32 and rounded once, not at every add") {
  // f16 holds every integer up to 2048, then only even ones: 2048 + 1 rounds back to 2048. bf16
  // stops at 256 the same way.
  for (auto [t, n] : {std::pair{kF16, int64_t(4096)}, std::pair{kBF16, int64_t(1024)}}) {
    CAPTURE(t);
    const Tensor out = native::index_add(zeros({2, 3}, t), 0, zeros({n}, kI64), ones({n, 3}, t));
    CHECK(out.dtype() == t);
    CHECK(values(out) == std::vector<double>{double(n), double(n), double(n), 0, 0, 0});
  }
}

TEST_CASE("index index_add: repeated indices accumulate") {
  manual_seed(5);
  for (DType t : kTypes) {
    CAPTURE(t);
    Tensor x = rnd({4, 6, 5}, t);
    for (int64_t dim : {0, 1, -1}) {
      CAPTURE(dim);
      int64_t n = x.size(dim);
      Shape ss = x.shape();
      ss[size_t(dim < 0 ? dim + 3 : dim)] = 9;
      Tensor idx = randint(0, n, {9});
      check_index_add(x, dim, idx, rnd(ss, t));
      check_index_add(transposed(x), dim, sliced(idx.to(kI32)), transposed(rnd(ss, t)));
      ss[size_t(dim < 0 ? dim + 3 : dim)] = 0;
      check_index_add(x, dim, zeros({0}, kI64), rnd(ss, t));
    }
  }
  check_index_add(zeros({3}), 0, from_vector<int64_t>({1, 1, 1, 2}), from_vector<float>({1, 2, 3, 4}));
  Tensor s = native::index_add(scalar_tensor(1.0), 0, from_vector<int64_t>({0}), scalar_tensor(2.0));
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 3.0f);
  // Threaded: an embedding-style backward, bit-identical for any thread count.
  Tensor idx = randint(0, 50, {3000});
  Tensor src = randn({3000, 64});
  check_index_add(rnd({50, 64}, kF32), 0, idx, rnd({3000, 64}, kF32));
  check_thread_independent([&] { return native::index_add(zeros({50, 64}), 0, idx, src); });
  Tensor src_t = randn({64, 3000});
  check_index_add(rnd({64, 50}, kF64), 1, idx, rnd({64, 3000}, kF64));
  check_thread_independent([&] { return native::index_add(zeros({64, 50}), 1, idx, src_t); });
}

TEST_CASE("index index_add: errors") {
  Tensor x = zeros({5, 3});
  CHECK_THROWS_WITH_AS(native::index_add(x, 0, from_vector<int64_t>({7}), ones({1, 3})),
                       doctest::Contains("index_add: index 7 is out of range for dim 0 with size 5"), Error);
  CHECK_THROWS_WITH_AS(native::index_add(x, 0, from_vector<int64_t>({1}), ones({1, 3}, kF64)),
                       doctest::Contains("index_add: src has dtype f64 but the input has dtype f32"), Error);
  CHECK_THROWS_WITH_AS(native::index_add(x, 0, from_vector<int64_t>({1, 2}), ones({1, 3})),
                       doctest::Contains("index_add: src has size 1 along dim 0 but the index has 2 entries"), Error);
  CHECK_THROWS_WITH_AS(
      native::index_add(x, 0, from_vector<int64_t>({1}), ones({1, 4})),
      doctest::Contains("index_add: src of shape [1,4] does not match the input's shape [5,3] outside dim 0"), Error);
  CHECK_THROWS_WITH_AS(
      native::index_add(x, 0, from_vector<int64_t>({1}), ones({3})),
      doctest::Contains("index_add: src of shape [3] must have as many dims as the input of shape [5,3]"), Error);
  CHECK_THROWS_WITH_AS(native::index_add(x, 0, from_vector<uint8_t>({1}), ones({1, 3})),
                       doctest::Contains("index_add: index must be I64 or I32, got u8"), Error);
}

// ---- gather / scatter_add ----------------------------------------------------------------------
namespace {
void check_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = gather(x, dim, index);
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  REQUIRE(out.shape() == index.shape());
  CHECK(out.dtype() == x.dtype());
  auto xv = values(x), iv = values(index), o = values(out);
  std::vector<double> want(o.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape c = unravel(i, index.shape());
    c[size_t(d)] = int64_t(iv[size_t(i)]);
    want[size_t(i)] = xv[size_t(ravel(c, x.shape()))];
  }
  CHECK(o == want);
}
}  // namespace

TEST_CASE("index gather: against a loop") {
  manual_seed(6);
  for (DType t : kTypes) {
    CAPTURE(t);
    Tensor x = rnd({4, 6, 5}, t);
    for (int64_t dim : {0, 1, 2, -1}) {
      CAPTURE(dim);
      int64_t n = x.size(dim);
      check_gather(x, dim, randint(0, n, {4, 6, 5}));
      check_gather(transposed(x), dim, randint(0, n, {3, 2, 4}));
      check_gather(sliced(x), dim, transposed(randint(0, n, {2, 6, 3}, kI32)));
      Shape big = {3, 5, 4};
      big[size_t(dim < 0 ? dim + 3 : dim)] = 11;  // longer than x along dim is fine
      check_gather(x, dim, randint(0, n, big));
      check_gather(x, dim, zeros({4, 0, 5}, kI64));
    }
  }
  check_gather(randn({500, 300}).t(), 1, randint(0, 500, {300, 400}));
  Tensor s = gather(scalar_tensor(3.0), 0, zeros({}, kI64));
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 3.0f);
}

TEST_CASE("index gather: errors") {
  Tensor x = ones({3, 5});
  CHECK_THROWS_WITH_AS(gather(x, 1, from_vector<int64_t>({0, 5}, {1, 2})),
                       doctest::Contains("gather: index 5 is out of range for dim 1 with size 5"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 0, from_vector<int64_t>({-1}, {1, 1})),
                       doctest::Contains("gather: index -1 is out of range for dim 0 with size 3"), Error);
  CHECK_THROWS_WITH_AS(
      gather(x, 1, zeros({3}, kI64)),
      doctest::Contains("gather: index of shape [3] must have as many dims as the input of shape [3,5]"), Error);
  CHECK_THROWS_WITH_AS(
      gather(x, 1, zeros({4, 2}, kI64)),
      doctest::Contains("gather: index of shape [4,2] is larger than the input of shape [3,5] in dim 0"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, zeros({3, 5})), doctest::Contains("gather: index must be I64 or I32, got f32"),
                       Error);
}

namespace {
void check_scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = scatter_add(x, dim, index, src);
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  REQUIRE(out.shape() == x.shape());
  CHECK(out.dtype() == x.dtype());
  auto xv = values(x), iv = values(index), sv = values(src), o = values(out);
  std::vector<double> want = xv;
  for (int64_t i = 0; i < index.numel(); ++i) {
    Shape c = unravel(i, index.shape());
    double s = sv[size_t(ravel(c, src.shape()))];
    c[size_t(d)] = int64_t(iv[size_t(i)]);
    double& w = want[size_t(ravel(c, x.shape()))];
    w = x.dtype() == kBool ? double(w || s) : w + s;
  }
  CHECK(o == want);
}
}  // namespace

TEST_CASE("index scatter_add: collisions, smaller index, strides") {
  manual_seed(7);
  for (DType t : kTypes) {
    CAPTURE(t);
    Tensor x = rnd({4, 6, 5}, t);
    for (int64_t dim : {0, 1, 2, -2}) {
      CAPTURE(dim);
      int64_t n = x.size(dim);
      Shape big = {4, 6, 5};
      big[size_t(dim < 0 ? dim + 3 : dim)] = 13;
      check_scatter_add(x, dim, randint(0, n, big), rnd(big, t));
      check_scatter_add(transposed(x), dim, randint(0, n, {3, 2, 4}), sliced(rnd({4, 6, 5}, t)));
      check_scatter_add(x, dim, transposed(randint(0, n, {2, 3, 2}, kI32)), transposed(rnd({3, 6, 5}, t)));
      check_scatter_add(x, dim, zeros({0, 2, 2}, kI64), rnd({1, 2, 2}, t));
    }
  }
  check_scatter_add(zeros({3}), 0, from_vector<int64_t>({2, 2, 0, 2}), from_vector<float>({1, 2, 3, 4}));
  Tensor s = scatter_add(scalar_tensor(1.0), 0, zeros({}, kI64), scalar_tensor(2.0));
  CHECK(s.dim() == 0);
  CHECK(s.item<float>() == 3.0f);
  // Threaded with many collisions; identical sums for any thread count.
  Tensor idx = randint(0, 40, {64, 3000}), src = randn({64, 3000});
  check_scatter_add(rnd({64, 40}, kF64), 1, idx, rnd({64, 3000}, kF64));
  check_scatter_add(rnd({40, 64}, kF32), 0, idx.t(), rnd({3000, 64}, kF32));
  check_thread_independent([&] { return scatter_add(zeros({64, 40}), 1, idx, src); });
  check_thread_independent([&] { return scatter_add(zeros({40, 64}), 0, idx.t(), src.t()); });
  Tensor idx0 = randint(0, 40, {3000, 64});
  check_scatter_add(rnd({40, 64}, kI64), 0, idx0, rnd({3000, 64}, kI64));
  check_thread_independent([&] { return scatter_add(zeros({40, 64}), 0, idx0, src.t().contiguous()); });
}

TEST_CASE("index scatter_add: errors") {
  Tensor x = zeros({3, 5});
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, from_vector<int64_t>({3}, {1, 1}), ones({1, 1})),
                       doctest::Contains("scatter_add: index 3 is out of range for dim 0 with size 3"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, zeros({2, 2}, kI64), ones({1, 2})),
                       doctest::Contains("scatter_add: index of shape [2,2] is larger than src of shape [1,2]"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, zeros({2, 6}, kI64), ones({2, 6})),
                       doctest::Contains("or than the input of shape [3,5] in dim 1"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, zeros({2}, kI64), ones({2})),
                       doctest::Contains("scatter_add: index of shape [2] and src of shape [2] must have as many dims"),
                       Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, zeros({1, 1}, kI64), ones({1, 1}, kF16)),
                       doctest::Contains("scatter_add: src has dtype f16 but the input has dtype f32"), Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, zeros({1, 1}, kBool), ones({1, 1})),
                       doctest::Contains("scatter_add: index must be I64 or I32, got bool"), Error);
}

// ---- tril / triu ------------------------------------------------------------------------------
TEST_CASE("index tril/triu: diagonals, batches, strides") {
  manual_seed(8);
  for (DType t : kTypes)
    for (Shape s : {Shape{4, 4}, Shape{3, 6}, Shape{6, 3}, Shape{2, 3, 4, 5}, Shape{1, 1}, Shape{0, 3}, Shape{2, 0, 3}})
      for (int64_t k : {-100, -2, -1, 0, 1, 3, 100}) {
        CAPTURE(t);
        CAPTURE(shape_str(s));
        CAPTURE(k);
        Tensor x = rnd(s, t);
        for (const Tensor& in : {x, transposed(x), sliced(x)}) {
          Tensor lo = tril(in, k), up = triu(in, k);
          auto xv = values(in), lv = values(lo), uv = values(up);
          REQUIRE(lo.shape() == s);
          std::vector<double> wl(xv.size()), wu(xv.size());
          for (int64_t i = 0; i < in.numel(); ++i) {
            Shape c = unravel(i, s);
            int64_t r = c[c.size() - 2], col = c.back();
            wl[size_t(i)] = col - r <= k ? xv[size_t(i)] : 0.0;
            wu[size_t(i)] = col - r >= k ? xv[size_t(i)] : 0.0;
          }
          CHECK(lv == wl);
          CHECK(uv == wu);
        }
      }
  // Threaded.
  Tensor x = randn({3, 300, 200}).transpose(1, 2);
  auto xv = values(x), lv = values(tril(x, 5));
  bool ok = true;
  for (int64_t i = 0; i < x.numel(); ++i) {
    Shape c = unravel(i, x.shape());
    ok &= lv[size_t(i)] == (c[2] - c[1] <= 5 ? xv[size_t(i)] : 0.0);
  }
  CHECK(ok);
}

TEST_CASE("index tril/triu: errors") {
  CHECK_THROWS_WITH_AS(tril(ones({3})),
                       doctest::Contains("tril: expected a tensor with at least 2 dims, got shape [3]"), Error);
  CHECK_THROWS_WITH_AS(triu(scalar_tensor(1.0)),
                       doctest::Contains("triu: expected a tensor with at least 2 dims, got shape []"), Error);
}

// ---- one_hot --------------------------------------------------------------------------------
TEST_CASE("index one_hot: against a loop") {
  manual_seed(9);
  for (DType t : {kI64, kI32, kU8})
    for (Shape s : {Shape{7}, Shape{3, 4}, Shape{}}) {
      CAPTURE(t);
      CAPTURE(shape_str(s));
      Tensor idx = sliced(randint(0, 5, s).to(t));
      for (int64_t nc : {-1, 5, 8}) {
        Tensor out = one_hot(idx, nc);
        auto iv = values(idx);
        int64_t c = nc == -1 ? int64_t(*std::max_element(iv.begin(), iv.end())) + 1 : nc;
        Shape want_shape = s;
        want_shape.push_back(c);
        REQUIRE(out.shape() == want_shape);
        CHECK(out.dtype() == kI64);
        auto o = values(out);
        std::vector<double> want(o.size(), 0.0);
        for (size_t i = 0; i < iv.size(); ++i) want[i * size_t(c) + size_t(iv[i])] = 1.0;
        CHECK(o == want);
      }
    }
  CHECK(values(one_hot(from_vector<int64_t>({2, 0}))) == std::vector<double>{0, 0, 1, 1, 0, 0});
  CHECK(one_hot(zeros({0}, kI64), 4).shape() == Shape{0, 4});
  CHECK(one_hot(zeros({2, 0}, kI64), 0).shape() == Shape{2, 0, 0});
}

TEST_CASE("index one_hot: errors") {
  CHECK_THROWS_WITH_AS(one_hot(from_vector<int64_t>({1, -1, 2})),
                       doctest::Contains("one_hot: class values must be non-negative, got -1"), Error);
  CHECK_THROWS_WITH_AS(one_hot(from_vector<int64_t>({1, 3}), 3),
                       doctest::Contains("one_hot: class value 3 is out of range for num_classes 3"), Error);
  CHECK_THROWS_WITH_AS(one_hot(zeros({0}, kI64)),
                       doctest::Contains("one_hot: cannot infer num_classes from an empty index"), Error);
  CHECK_THROWS_WITH_AS(one_hot(ones({2}), 3), doctest::Contains("one_hot: index must be an integer tensor, got f32"),
                       Error);
  CHECK_THROWS_WITH_AS(one_hot(ones({2}, kBool), 3),
                       doctest::Contains("one_hot: index must be an integer tensor, got bool"), Error);
  CHECK_THROWS_WITH_AS(one_hot(ones({2}, kI64), -2),
                       doctest::Contains("one_hot: num_classes must be -1 (infer) or non-negative, got -2"), Error);
}
