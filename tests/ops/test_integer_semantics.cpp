// Integer tensors beside double arguments, against PyTorch 1.13: true division does not wrap its
// scalar, clamp's bounds past the dtype are no bounds, pow's exponent and fill values the dtype
// cannot hold are refused, relu keeps the dtype, printing and the integer factories are exact
// past 2^53, and signed overflow wraps without undefined behaviour.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;

namespace {
Tensor u8(const std::vector<uint8_t>& v) { return from_vector<uint8_t>(v, {int64_t(v.size())}); }
Tensor i32(const std::vector<int32_t>& v) { return from_vector<int32_t>(v, {int64_t(v.size())}); }
Tensor i64(const std::vector<int64_t>& v) { return from_vector<int64_t>(v, {int64_t(v.size())}); }
}  // namespace

TEST_CASE("integer semantics: dividing by or into a double keeps the double's value (torch.div)") {
  CHECK(((u8({10, 200}) / -1.0).to_vector<float>()) == std::vector<float>{-10, -200});
  CHECK(((u8({10, 200}) / 256.0).to_vector<float>()) == std::vector<float>{10.0f / 256, 200.0f / 256});
  CHECK(((-1.0 / u8({10, 200})).to_vector<float>()) == std::vector<float>{-0.1f, -0.005f});
  CHECK(((i32({1, 6}) / 4294967296.0).to_vector<float>()) == std::vector<float>{0x1p-32f, 6 * 0x1p-32f});
  CHECK((u8({10}) / 4.0).dtype() == kF32);
  CHECK(((i64({7}) / 2.0).to_vector<float>()) == std::vector<float>{3.5f});
}

TEST_CASE("integer semantics: clamp's whole bounds past the dtype bound nothing, or are refused") {
  CHECK(clamp(u8({0, 5, 200}), 0, 256).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 200});
  CHECK(clamp(u8({0, 5, 200}), -1, std::nullopt).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 200});
  CHECK(clamp(u8({0, 5, 200}), -1, 100).to_vector<uint8_t>() == std::vector<uint8_t>{0, 5, 100});
  CHECK(clamp(i32({-7, 5, 100}), 0, 3e9).to_vector<int32_t>() == std::vector<int32_t>{0, 5, 100});
  CHECK(clamp(u8({0, 5, 200}), 0, 256).dtype() == kU8);
  CHECK_THROWS_WITH_AS(clamp(u8({1}), 300, std::nullopt), doctest::Contains("min 300 is above every u8 value"), Error);
  CHECK_THROWS_WITH_AS(clamp(u8({1}), std::nullopt, -1), doctest::Contains("max -1 is below every u8 value"), Error);
}

TEST_CASE("integer semantics: pow's exponent and filled values must fit the dtype, as PyTorch's") {
  CHECK(pow(u8({3, 10}), 2.0).to_vector<uint8_t>() == std::vector<uint8_t>{9, 100});
  CHECK_THROWS_WITH_AS(pow(u8({3, 10}), 256.0), doctest::Contains("cannot be converted to u8 without overflow"), Error);
  CHECK_THROWS_WITH_AS(pow(i32({3}), -1.0), doctest::Contains("negative integer powers"), Error);
  // -1 into u8 wraps to 255 (a Python int's bits); 300 is past the width; NaN is no integer.
  CHECK(full({2}, -1, kU8).to_vector<uint8_t>() == std::vector<uint8_t>{255, 255});
  CHECK(full({2}, 2.7, kI32).to_vector<int32_t>() == std::vector<int32_t>{2, 2});
  CHECK(full({1}, 4294967295.0, kI32).to_vector<int32_t>() == std::vector<int32_t>{-1});
  CHECK_THROWS_WITH_AS(full({2}, 300, kU8), doctest::Contains("full: 300 cannot be converted to u8"), Error);
  Tensor x = zeros({3}, kU8);
  x.fill_(-1);
  CHECK(x.to_vector<uint8_t>() == std::vector<uint8_t>{255, 255, 255});
  const Tensor mask = from_vector<bool>({true, false, true}, {3});
  CHECK(masked_fill(zeros({3}, kU8), mask, -1).to_vector<uint8_t>() == std::vector<uint8_t>{255, 0, 255});
  CHECK_THROWS_WITH_AS(masked_fill(zeros({3}, kU8), mask, 300), doctest::Contains("masked_fill: 300"), Error);
  CHECK_THROWS_WITH_AS(masked_fill(zeros({3}, kI32), mask, std::nan("")), doctest::Contains("masked_fill: nan"), Error);
  CHECK(full({1}, 2, kBool).to_vector<bool>() == std::vector<bool>{true});
}

TEST_CASE("integer semantics: relu keeps an integer dtype, exactly") {
  const Tensor r = relu(i64({-3, 16777217, 0}));
  CHECK(r.dtype() == kI64);
  CHECK(r.to_vector<int64_t>() == std::vector<int64_t>{0, 16777217, 0});
  CHECK(relu(u8({0, 7})).to_vector<uint8_t>() == std::vector<uint8_t>{0, 7});
}

TEST_CASE("integer semantics: i64 prints, draws and ranges exactly past 2^53") {
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(i64({big, (int64_t(1) << 53) + 1, std::numeric_limits<int64_t>::min()}).str() ==
        "tensor([9223372036854775807, 9007199254740993, -9223372036854775808], dtype=i64)");
  CHECK(arange(9007199254740992.0, 9007199254740996.0, 1, kI64).to_vector<int64_t>() ==
        std::vector<int64_t>{9007199254740992, 9007199254740993, 9007199254740994, 9007199254740995});
  CHECK(arange(250, 260, 1, kU8).to_vector<uint8_t>() ==
        std::vector<uint8_t>{250, 251, 252, 253, 254, 255, 0, 1, 2, 3});
  CHECK_THROWS_WITH_AS(arange(0, 3, 0.5, kI64), doctest::Contains("whole start and step"), Error);
  CHECK_THROWS_WITH_AS(arange(0, 1e20), doctest::Contains("arange:"), Error);
  CHECK_THROWS_WITH_AS(arange(0, 2, 1, kBool), doctest::Contains("arange: not defined for bool"), Error);

  Generator g(3);
  const std::vector<int64_t> draws = randint(0, int64_t(1) << 62, {4000}, kI64, &g).to_vector<int64_t>();
  int64_t odd = 0;
  for (int64_t v : draws) odd += v & 1;
  CHECK(odd > 1800);  // about half; through a double, almost none were odd
  CHECK(odd < 2200);
  for (int64_t v : randint(big - 10, big, {1000}, kI64, &g).to_vector<int64_t>()) {
    CHECK(v >= big - 10);
    CHECK(v < big);  // high is never drawn
  }
  CHECK_THROWS_WITH_AS(randint(0, 1000, {3}, kU8, &g), doctest::Contains("randint: the range [0, 1000) is past u8"),
                       Error);
  CHECK_THROWS_WITH_AS(randint(-1, 3, {3}, kU8, &g), doctest::Contains("past u8"), Error);
  for (uint8_t v : randint(250, 256, {200}, kU8, &g).to_vector<uint8_t>()) CHECK(v >= 250);
}

TEST_CASE("integer semantics: add, sub and mul of signed integers wrap (two's complement)") {
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  CHECK((i64({max64}) + i64({1})).to_vector<int64_t>() == std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
  CHECK((i32({INT32_MIN}) - i32({1})).to_vector<int32_t>() == std::vector<int32_t>{INT32_MAX});
  CHECK((i32({65536}) * i32({65536})).to_vector<int32_t>() == std::vector<int32_t>{0});
  CHECK(add_relu(i32({INT32_MAX}), i32({1})).to_vector<int32_t>() == std::vector<int32_t>{0});
}
