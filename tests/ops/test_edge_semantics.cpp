// Edge cases a PyTorch user meets, each once wrong here: whole scalars an integer dtype cannot
// hold (wrapped as PyTorch's Python ints, where they were clamped), std's and max's gradients at a zero deviation and at NaN, clamp's gradient at NaN, in-place
// results that would be truncated, where's 0-dim promotion, dims of 0-d tensors, chunks of nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
using V = std::vector<double>;

TEST_CASE("edge: a whole scalar an integer dtype cannot hold wraps as PyTorch's ints do, never clamps") {
  Tensor u8 = from_vector<uint8_t>({0, 5});
  CHECK((u8 + -1.0).dtype() == kU8);
  CHECK(values(u8 + -1.0) == V{255, 4});
  CHECK(values(u8 * -1.0) == V{0, 251});
  Tensor acc = from_vector<uint8_t>({5, 7});
  acc.add_(from_vector<uint8_t>({1, 2}), -1.0);  // alpha -1 is 255: x + 255 y wraps to x - y
  CHECK(values(acc) == V{4, 5});
  CHECK(values(from_vector<int32_t>({1, 2}) + 1e10) == V{1410065409, 1410065410});  // 1e10 mod 2^32
  CHECK((from_vector<int32_t>({1}) + 7.0).dtype() == kI32);
  CHECK_THROWS_WITH_AS(from_vector<int64_t>({1, 2}) * 1e20, doctest::Contains("past the range of a 64-bit integer"),
                       Error);
}

TEST_CASE("edge: std's gradient is 0 where the deviation is 0; max's goes to the NaNs") {
  Tensor x = from_vector<double>({2, 2, 2, 1, 2, 3}, {2, 3});
  x.requires_grad_();
  sum(mdl::std(x, {1})).backward();
  check_close(x.grad(), V{0, 0, 0, -0.5, 0, 0.5}, {.rtol = 1e-12, .atol = 1e-15});
  Tensor one = from_vector<double>({4}, {1});
  one.requires_grad_();
  sum(mdl::std(one, {0}, 0)).backward();
  CHECK(values(one.grad()) == V{0});

  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (bool is_max : {true, false}) {
    Tensor y = from_vector<double>({1, nan, 3, nan});
    y.requires_grad_();
    (is_max ? max(y) : min(y)).backward();
    CHECK(values(y.grad()) == V{0, 0.5, 0, 0.5});
  }
}

TEST_CASE("edge: clamp passes no gradient through a NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = from_vector<float>({nan, 0.5f, 2.0f});
  x.requires_grad_();
  sum(clamp(x, -1.0, 1.0)).backward();
  CHECK(values(x.grad()) == V{0, 1, 0});
}

TEST_CASE("edge: an in-place result that would be truncated is refused") {
  Tensor a = from_vector<int64_t>({1, 2, 3});
  CHECK_THROWS_WITH_AS(a.add_(from_vector<float>({0.5f, 0.5f, 0.5f})),
                       doctest::Contains("add_: the result's dtype f32 cannot be written into the i64 tensor"), Error);
  CHECK_THROWS_WITH_AS(a.div_(from_vector<int64_t>({2, 3, 2})), doctest::Contains("div_: the result's dtype f32"),
                       Error);
  CHECK_THROWS_WITH_AS(a.add_(from_vector<int64_t>({1, 1, 1}), 0.5), doctest::Contains("add_"), Error);
  CHECK_THROWS_WITH_AS(a.mul_(0.5), doctest::Contains("mul_"), Error);
  CHECK(values(a) == V{1, 2, 3});
  a.add_(from_vector<int64_t>({1, 1, 1}), 2.0);
  CHECK(values(a) == V{3, 4, 5});
  Tensor b = from_vector<bool>({true, false, true});
  CHECK_THROWS_WITH_AS(b.mul_(from_vector<int64_t>({2, 2, 0})), doctest::Contains("into the bool tensor"), Error);
  Tensor f = from_vector<float>({1, 2});
  f.add_(from_vector<double>({0.5, 0.5}));  // a float into a float is rounded, as PyTorch
  CHECK(values(f) == V{1.5, 2.5});
}

TEST_CASE("edge: where, 0-d dims and chunks of an empty dim follow PyTorch") {
  Tensor w = where(from_vector<bool>({true, false}), scalar_tensor(1.5, kF64), from_vector<float>({1, 2}));
  CHECK(w.dtype() == kF32);
  CHECK(values(w) == V{1.5, 2});
  Tensor s = scalar_tensor(3.0);
  CHECK(transpose(s, 0, -1).dim() == 0);
  CHECK_THROWS_WITH_AS(transpose(s, 3, 5), doctest::Contains("transpose"), Error);
  CHECK_THROWS_WITH_AS(squeeze(s, 4), doctest::Contains("squeeze"), Error);
  const std::vector<Tensor> parts = chunk(zeros({0, 2}), 3);
  REQUIRE(parts.size() == 3);
  for (const Tensor& p : parts) CHECK(p.shape() == Shape{0, 2});
  CHECK(chunk(zeros({0, 2}), 3, 1).size() == 2);
}
