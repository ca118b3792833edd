// State-dict loaders under bad input: the optimizer's, the GradScaler's and Module's refuse
// malformed names, non-finite or out-of-range numbers, wrong shapes and dtypes with an
// mdl::Error, and a refused load leaves the object exactly as it was. The GradScaler refuses a
// scale that f32 cannot carry (0, subnormal, non-finite) instead of stepping on zero gradients.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "mdl.h"
#include "tests/support/test_util.h"

using namespace mdl;
using mdl::test::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An Adam optimizer over two parameters that has taken one step, so its state dict holds every entry.
struct Stepped {
  Tensor a = randn({3, 2}).requires_grad_(), b = randn({4}).requires_grad_();
  optim::Adam opt{std::vector<Tensor>{a, b}, {.lr = 0.01}};
  Stepped() {
    a.set_grad(ones({3, 2}));
    b.set_grad(ones({4}));
    opt.step();
  }
};

NamedTensors with(NamedTensors d, const std::string& name, const Tensor& value) {
  for (auto& [n, t] : d)
    if (n == name) {
      t = value;
      return d;
    }
  d.emplace_back(name, value);
  return d;
}

// The optimizer's step count, options and state buffers, as numbers.
std::vector<double> optimizer_snapshot(const optim::Optimizer& opt) {
  std::vector<double> s = {double(opt.step_count())};
  for (const auto& [name, t] : opt.state_dict())
    for (double v : values(t)) s.push_back(v);
  return s;
}

}  // namespace

TEST_CASE("optimizer state dict: malformed names, non-finite and out-of-range values give mdl::Error") {
  Stepped src;
  const NamedTensors good = src.opt.state_dict();
  Stepped dst;
  dst.opt.set_lr(0.5);
  const auto before = optimizer_snapshot(dst.opt);
  auto refused = [&](const NamedTensors& d, const std::string& message) {
    CHECK_THROWS_WITH_AS(dst.opt.load_state_dict(d), doctest::Contains(message.c_str()), Error);
    CHECK(optimizer_snapshot(dst.opt) == before);  // nothing applied
  };
  refused(with(good, "state.x.step", scalar_tensor(1.0, kI64)), "\"state.x.step\"");
  refused(with(good, "state.1x.step", scalar_tensor(1.0, kI64)), "\"state.1x.step\"");
  refused(with(good, "state.99999999999999999999.step", scalar_tensor(1.0, kI64)), "state.99999999999999999999");
  refused(with(good, "state.-1.step", scalar_tensor(1.0, kI64)), "state.-1.step");
  refused(with(good, "state.0", scalar_tensor(1.0, kI64)), "\"state.0\"");
  refused(with(good, "state.0.velocity", zeros({3, 2})), "state.0.velocity");
  refused(with(good, "param_groups.0.momentum_typo", scalar_tensor(1.0, kF64)), "param_groups.0.momentum_typo");
  refused(with(good, "step", scalar_tensor(kNaN, kF64)), "\"step\"");
  refused(with(good, "step", scalar_tensor(1e300, kF64)), "\"step\"");
  refused(with(good, "step", scalar_tensor(-3.0, kI64)), "\"step\"");
  refused(with(good, "step", scalar_tensor(2.5, kF64)), "\"step\"");
  refused(with(good, "state.0.step", scalar_tensor(kNaN, kF64)), "state.0.step");
  refused(with(good, "param_groups.0.num_params", scalar_tensor(kNaN, kF64)), "num_params");
  refused(with(good, "param_groups.0.lr", scalar_tensor(kNaN, kF64)), "param_groups.0.lr");
  refused(with(good, "param_groups.0.lr", scalar_tensor(-1.0, kF64)), "param_groups.0.lr");
  refused(with(good, "param_groups.0.beta2", scalar_tensor(INFINITY, kF64)), "param_groups.0.beta2");
  refused(with(good, "param_groups.0.lr", zeros({2}, kF64)), "param_groups.0.lr");
  refused(with(good, "state.0.exp_avg", zeros({3, 2}, kF16)), "state.0.exp_avg");
  refused(with(good, "state.0.exp_avg", zeros({2, 3})), "state.0.exp_avg");
  refused(with(good, "state.1.exp_avg_sq", full({4}, kNaN)), "state.1.exp_avg_sq");

  // A state dict that fails late (a missing option) must not have changed the step count first.
  NamedTensors late;
  for (const auto& [n, t] : good)
    if (n != "param_groups.0.eps") late.emplace_back(n, t);
  refused(with(late, "step", scalar_tensor(7.0, kI64)), "param_groups.0.eps");

  dst.opt.load_state_dict(good);  // the good one still loads
  CHECK(optimizer_snapshot(dst.opt) == optimizer_snapshot(src.opt));
}

TEST_CASE("GradScaler state dict: non-finite and out-of-range counters give mdl::Error, nothing applied") {
  amp::GradScaler src({.init_scale = 1024, .growth_interval = 5});
  const NamedTensors good = src.state_dict();
  amp::GradScaler dst({.init_scale = 8, .growth_interval = 3});
  auto refused = [&](const NamedTensors& d, const char* message) {
    CHECK_THROWS_WITH_AS(dst.load_state_dict(d), doctest::Contains(message), Error);
    CHECK(dst.get_scale() == 8);
    CHECK(dst.growth_tracker() == 0);
    CHECK(dst.skipped_steps() == 0);
  };
  refused(with(good, "growth_interval", scalar_tensor(kNaN, kF64)), "growth_interval");
  refused(with(good, "growth_interval", scalar_tensor(1e300, kF64)), "growth_interval");
  refused(with(good, "_growth_tracker", scalar_tensor(kNaN, kF64)), "_growth_tracker");
  refused(with(good, "_growth_tracker", scalar_tensor(-1.0, kI64)), "_growth_tracker");
  refused(with(good, "_growth_tracker", scalar_tensor(5.0, kI64)), "_growth_tracker");  // = growth_interval
  refused(with(good, "skipped_steps", scalar_tensor(1e300, kF64)), "skipped_steps");
  refused(with(good, "skipped_steps", scalar_tensor(0.5, kF64)), "skipped_steps");
  refused(with(good, "scale", scalar_tensor(kNaN, kF64)), "scale");
  refused(with(good, "scale", scalar_tensor(1e-300, kF64)), "scale");
  refused(with(good, "growth_factor", scalar_tensor(INFINITY, kF64)), "growth_factor");
  dst.load_state_dict(good);
  CHECK(dst.get_scale() == 1024);
}

TEST_CASE("GradScaler: a scale f32 cannot carry is refused, and backing off below it stops with a message") {
  CHECK_THROWS_WITH_AS(amp::GradScaler({.init_scale = 1e-300}), doctest::Contains("init_scale"), Error);
  CHECK_THROWS_WITH_AS(amp::GradScaler({.init_scale = 1e39}), doctest::Contains("init_scale"), Error);
  amp::GradScaler fine({.init_scale = 1.0});
  CHECK_THROWS_WITH_AS(fine.update(1e-40), doctest::Contains("new_scale"), Error);

  // Every step finds an inf: the scale halves from 2^-125 to 2^-126 (f32's smallest normal
  // number), and the next back-off would leave f32's normal range.
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  amp::GradScaler s({.init_scale = std::ldexp(1.0, -125)});
  auto skipped_step = [&] {
    opt.zero_grad();
    w.set_grad(full({2}, INFINITY));
    CHECK_FALSE(s.step(opt));
  };
  skipped_step();
  s.update();
  CHECK(s.get_scale() == std::ldexp(1.0, -126));
  skipped_step();
  CHECK_THROWS_WITH_AS(s.update(), doctest::Contains("diverged"), Error);
  CHECK(s.get_scale() == std::ldexp(1.0, -126));
  CHECK(values(w) == std::vector<double>{1, 1});
}

TEST_CASE("Module::load_state_dict checks every entry before it copies any") {
  nn::Sequential model({std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::BatchNorm2d>(2)});
  const NamedTensors original = model.state_dict();
  std::vector<std::vector<double>> before;
  for (const auto& [n, t] : original) before.push_back(values(t));
  auto unchanged = [&] {
    const NamedTensors now = model.state_dict();
    for (size_t i = 0; i < now.size(); ++i) CHECK(values(now[i].second) == before[i]);
  };
  NamedTensors replaced;
  for (const auto& [n, t] : original) replaced.emplace_back(n, full(t.shape(), 5.0, t.dtype()));

  SUBCASE("an unexpected name after good entries") {
    NamedTensors d = replaced;
    d.emplace_back("extra.weight", zeros({1}));
    CHECK_THROWS_WITH_AS(model.load_state_dict(d), doctest::Contains("unexpected 'extra.weight'"), Error);
    unchanged();
  }
  SUBCASE("a missing name") {
    NamedTensors d(replaced.begin(), replaced.end() - 1);
    CHECK_THROWS_WITH_AS(model.load_state_dict(d), doctest::Contains("missing"), Error);
    unchanged();
  }
  SUBCASE("a wrong shape in the last entry") {
    NamedTensors d = replaced;
    d.back().second = zeros({2});
    CHECK_THROWS_WITH_AS(model.load_state_dict(d), doctest::Contains("has shape"), Error);
    unchanged();
  }
  SUBCASE("an integer buffer of another integer dtype") {
    NamedTensors d = replaced;
    d.back().second = zeros({}, kI32);  // num_batches_tracked is i64
    CHECK_THROWS_WITH_AS(model.load_state_dict(d), doctest::Contains("has dtype i32"), Error);
    unchanged();
  }
  SUBCASE("floating values of another floating dtype are rounded in, as PyTorch's copy_") {
    NamedTensors d = replaced;
    d[0].second = full(d[0].second.shape(), 0.1, kF64);
    model.load_state_dict(d);
    CHECK(values(model.state_dict()[0].second)[0] == double(0.1f));
    CHECK(values(model.state_dict().back().second)[0] == 5.0);
  }
}
