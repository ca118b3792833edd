// Post-accumulate-grad hooks (autograd/hooks.h): each fires once per backward, after every path
// into its leaf has been summed, later layers first; removal, accumulation across backwards, a
// leaf root, and the wrong uses with their messages.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "autograd/hooks.h"
#include "tensor/error.h"
#include "ops/native/factory.h"
#include "ops/ops.h"

using namespace mdl;

namespace {
Tensor leaf(const std::vector<double>& v, const Shape& s) {
  Tensor t = from_vector(v, s);
  t.requires_grad_();
  return t;
}

// Removes the hook when the test leaves, even on failure.
struct ScopedHook {
  uint64_t handle;
  ~ScopedHook() { autograd::remove_post_accumulate_grad_hook(handle); }
};
}  // namespace

TEST_CASE("post-accumulate-grad hook: once per backward, after every use of the leaf is summed") {
  Tensor w = leaf({2.0, 3.0}, {2});
  Tensor x = from_vector(std::vector<double>{5.0, 7.0}, {2});
  std::vector<std::vector<double>> seen;
  ScopedHook h{autograd::register_post_accumulate_grad_hook(w, [&](const Tensor& t) {
    CHECK(t.is_same(w));
    seen.push_back(t.grad().to_vector<double>());
  })};
  // w reaches the loss three ways: d/dw sum(x*w + w*w + w) = x + 2w + 1.
  sum(x * w + w * w + w).backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{5 + 4 + 1, 7 + 6 + 1});
  // A second backward without zero_grad: the hook sees the accumulated gradient.
  sum(x * w).backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{10 + 5, 14 + 7});
}

TEST_CASE("post-accumulate-grad hook: later layers' leaves finish first; removal stops it") {
  Tensor w1 = leaf({1, 2, 3, 4}, {2, 2}), w2 = leaf({1, -1, 2, 0}, {2, 2});
  Tensor x = from_vector(std::vector<double>{1, 2}, {1, 2});
  std::vector<std::string> order;
  const uint64_t h1 = autograd::register_post_accumulate_grad_hook(w1, [&](const Tensor&) { order.push_back("w1"); });
  const uint64_t h2 = autograd::register_post_accumulate_grad_hook(w2, [&](const Tensor&) { order.push_back("w2"); });
  ScopedHook guard1{h1}, guard2{h2};
  sum(matmul(matmul(x, w1), w2)).backward();
  CHECK(order == std::vector<std::string>{"w2", "w1"});
  autograd::remove_post_accumulate_grad_hook(h2);
  autograd::remove_post_accumulate_grad_hook(h2);  // twice: ignored
  order.clear();
  sum(matmul(matmul(x, w1), w2)).backward();
  CHECK(order == std::vector<std::string>{"w1"});
}

TEST_CASE("post-accumulate-grad hook: a leaf root fires too; a hook's error leaves backward") {
  Tensor w = leaf({1.0, 2.0}, {2});
  int calls = 0;
  ScopedHook h{autograd::register_post_accumulate_grad_hook(w, [&](const Tensor&) { ++calls; })};
  w.backward(from_vector(std::vector<double>{1.0, 1.0}, {2}));
  CHECK(calls == 1);
  ScopedHook thrower{autograd::register_post_accumulate_grad_hook(w, [](const Tensor&) { MDL_FAIL("hook says no"); })};
  CHECK_THROWS_WITH_AS(sum(w * w).backward(), "hook says no", Error);
}

TEST_CASE("post-accumulate-grad hook: refused on non-leaves and on tensors without grad") {
  Tensor w = leaf({1.0}, {1});
  Tensor y = w * 2.0;
  CHECK_THROWS_WITH_AS(autograd::register_post_accumulate_grad_hook(y, [](const Tensor&) {}),
                       doctest::Contains("is not a leaf that requires grad"), Error);
  CHECK_THROWS_WITH_AS(autograd::register_post_accumulate_grad_hook(zeros({3}), [](const Tensor&) {}),
                       doctest::Contains("shape [3] is not a leaf"), Error);
  CHECK_THROWS_WITH_AS(autograd::register_post_accumulate_grad_hook(w, nullptr),
                       "register_post_accumulate_grad_hook: empty hook", Error);
}
