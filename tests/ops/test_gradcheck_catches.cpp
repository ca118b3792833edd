// gradcheck itself is tested: an op recorded with a deliberately wrong backward must fail it
// (a missing factor, a gradient 1% off, a transposed gradient), and the correct backward passes.
// The nodes borrow registered op names ("mul", "matmul"): record() accepts only those.
#include <doctest/doctest.h>

#include "autograd/function.h"
#include "ops/gradcheck.h"
#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;

namespace {

// y = x * x, elementwise, with the backward given as grad_out -> grad_x.
Tensor square_with(const Tensor& x, std::function<Tensor(const Tensor& g, const Tensor& x)> backward) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * x;
  }
  autograd::record_fn("mul", {x}, {y}, {x}, [backward](const autograd::Grads& g, const autograd::FnNode& n) {
    return autograd::Grads{backward(g[0], n.saved(0))};
  });
  return y;
}

// y = x @ w, with the backward for w given.
Tensor matmul_with(const Tensor& x, const Tensor& w, bool transpose_bug) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = matmul(x, w);
  }
  autograd::record_fn("matmul", {x, w}, {y}, {x, w},
                      [transpose_bug](const autograd::Grads& g, const autograd::FnNode& n) {
                        Tensor x = n.saved(0), w = n.saved(1);
                        Tensor gw = matmul(x.t(), g[0]);
                        return autograd::Grads{matmul(g[0], w.t()), transpose_bug ? gw.t().contiguous() : gw};
                      });
  return y;
}

autograd::GradcheckResult check_square(std::function<Tensor(const Tensor&, const Tensor&)> backward) {
  Generator gen(11);
  Tensor x = leaf_of(uniform({3, 4}, gen));
  return autograd::gradcheck([&](const std::vector<Tensor>& in) { return square_with(in[0], backward); }, {x});
}

}  // namespace

TEST_CASE("gradcheck fails on a wrong backward and passes the right one") {
  CHECK(check_square([](const Tensor& g, const Tensor& x) { return g * x * 2.0; }));
  const auto missing_factor = check_square([](const Tensor& g, const Tensor& x) { return g * x; });
  CHECK_FALSE(missing_factor);
  CHECK(missing_factor.report.find("gradcheck: input 0") != std::string::npos);
  CHECK_FALSE(check_square([](const Tensor& g, const Tensor& x) { return g * x * 2.02; }));

  Generator gen(12);
  Tensor x = leaf_of(uniform({3, 3}, gen)), w = leaf_of(uniform({3, 3}, gen));
  auto run = [](bool bug) { return [bug](const std::vector<Tensor>& in) { return matmul_with(in[0], in[1], bug); }; };
  CHECK(autograd::gradcheck(run(false), {x, w}));
  CHECK_FALSE(autograd::gradcheck(run(true), {x, w}));
}
