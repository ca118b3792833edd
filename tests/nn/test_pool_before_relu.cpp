// nn::Sequential runs ReLU -> MaxPool2d as pool -> ReLU (the pool_before_relu switch): the output
// and every gradient are the same bit for bit as in the declared order, on inputs with ties,
// zeros, windows with no positive value and NaN; nn::summary still sees the declared order.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mdl.h"
#include "nn/container.h"
#include "nn/models/models.h"
#include "nn/summary.h"
#include "switches/list/toggles.h"

using namespace mdl;

namespace {

// Bits equal, NaN equal to NaN.
bool same(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

struct Result {
  std::vector<float> y, gx;
  std::vector<std::vector<float>> gw;
};

// With fused_pool_relu off: the fused op would take the pairs the swap reorders.
Result run(nn::Module& m, const Tensor& x0, const Tensor& gy, bool swap) {
  toggles::Scoped unfused(toggles::Toggle::fused_pool_relu, false);
  toggles::set_pool_before_relu(swap);
  Tensor x = x0.detach().clone();
  x.requires_grad_();
  m.zero_grad();
  Tensor y = m(x);
  y.backward(gy);
  toggles::set_pool_before_relu(true);
  Result r{y.to_vector<float>(), x.grad().to_vector<float>(), {}};
  for (const Tensor& p : m.parameters()) r.gw.push_back(p.grad().to_vector<float>());
  return r;
}

}  // namespace

TEST_CASE("pool before ReLU: SimpleCNN's output and gradients are bit-identical in both orders") {
  manual_seed(5);
  auto m = nn::models::SimpleCNN(1, 10, 28);
  Generator g(6);
  Tensor x = randn({3, 1, 28, 28}, kF32, &g), gy = randn({3, 10}, kF32, &g);
  const Result declared = run(*m, x, gy, false), swapped = run(*m, x, gy, true);
  CHECK(same(declared.y, swapped.y));
  CHECK(same(declared.gx, swapped.gx));
  REQUIRE(declared.gw.size() == swapped.gw.size());
  for (size_t i = 0; i < declared.gw.size(); ++i) CHECK(same(declared.gw[i], swapped.gw[i]));
}

TEST_CASE("pool before ReLU: ties, zeros, all-negative windows, padding and NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // One 4x6 plane: 2x2 windows with a tie of positives, a zero beside negatives, all negatives, NaN.
  const std::vector<float> v = {2,   2, 0, -1, -3, -4, 1, 2, -2,    -5, -1, -2,  //
                                nan, 1, 0, 0,  7,  7,  3, 4, -0.0f, -1, 7,  1};
  Tensor x = from_vector(v, {1, 1, 4, 6});
  for (auto pool : {std::make_shared<nn::MaxPool2d>(nn::Pair{2, 2}),
                    std::make_shared<nn::MaxPool2d>(nn::Pair{3, 3}, nn::Pair{1, 2}, nn::Pair{1, 1})}) {
    auto seq = std::make_shared<nn::Sequential>(
        std::initializer_list<nn::ModulePtr>{std::make_shared<nn::ReLU>(), pool});
    const Tensor y = (*seq)(x);
    Tensor gy = arange(1, double(y.numel()) + 1, 1, kF32).reshape(y.shape());
    const Result declared = run(*seq, x, gy, false), swapped = run(*seq, x, gy, true);
    CHECK(same(declared.y, swapped.y));
    CHECK(same(declared.gx, swapped.gx));
  }
}

TEST_CASE("pool before ReLU: nn::summary reports the declared order's shapes") {
  auto m = nn::models::SimpleCNN(1, 10, 28);
  REQUIRE(toggles::pool_before_relu());
  const std::string t = nn::summary(*m, randn({2, 1, 28, 28}));
  const size_t at = t.find("features.1 (ReLU)");
  REQUIRE(at != std::string::npos);
  CHECK(t.substr(at, t.find('\n', at) - at).find("[2, 32, 28, 28]") != std::string::npos);
}
