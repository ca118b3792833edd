// LR schedules against their closed forms at chosen steps, warm restarts where they should
// restart, warmup chained to a cosine schedule, OneCycle's endpoints, ReduceLROnPlateau.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <numbers>

#include "mdl.h"
#include "optim/schedulers.h"
#include "optim/sgd.h"

using namespace mdl;

namespace {
constexpr double kPi = std::numbers::pi;
struct Fixture {
  Tensor p = zeros({2});
  optim::SGD opt{std::vector<Tensor>{p}, optim::SGDOptions{.lr = 0.1}};
};
// Steps the scheduler up to `epoch` (from its current epoch) and returns the first group's lr.
double lr_after(optim::LRScheduler& s, optim::Optimizer& opt, int64_t epoch) {
  while (s.last_epoch() < epoch) s.step();
  return opt.lr();
}
}  // namespace

TEST_CASE("schedulers: StepLR") {
  Fixture f;
  optim::StepLR s(f.opt, 3, 0.5);
  CHECK(f.opt.lr() == doctest::Approx(0.1));
  CHECK(lr_after(s, f.opt, 2) == doctest::Approx(0.1));
  CHECK(lr_after(s, f.opt, 3) == doctest::Approx(0.05));
  CHECK(lr_after(s, f.opt, 7) == doctest::Approx(0.025));
}

TEST_CASE("schedulers: CosineAnnealingLR") {
  Fixture f;
  optim::CosineAnnealingLR s(f.opt, 10, 0.001);
  for (int64_t e : {0, 3, 5, 10}) {
    double want = 0.001 + (0.1 - 0.001) * (1 + std::cos(kPi * double(e) / 10)) / 2;
    CHECK(lr_after(s, f.opt, e) == doctest::Approx(want).epsilon(1e-12));
  }
  CHECK(f.opt.lr() == doctest::Approx(0.001));
}

TEST_CASE("schedulers: CosineAnnealingWarmRestarts restarts at T_0, T_0(1+T_mult), ...") {
  Fixture f;
  optim::CosineAnnealingWarmRestarts s(f.opt, 4, 2, 0.0);
  // Periods: [0,4), [4,12), [12,28).
  auto want = [](int64_t t_cur, int64_t t_i) { return 0.1 * (1 + std::cos(kPi * double(t_cur) / double(t_i))) / 2; };
  CHECK(lr_after(s, f.opt, 2) == doctest::Approx(want(2, 4)));
  CHECK(lr_after(s, f.opt, 3) == doctest::Approx(want(3, 4)));
  CHECK(lr_after(s, f.opt, 4) == doctest::Approx(0.1));  // restart
  CHECK(lr_after(s, f.opt, 8) == doctest::Approx(want(4, 8)));
  CHECK(lr_after(s, f.opt, 11) == doctest::Approx(want(7, 8)));
  CHECK(lr_after(s, f.opt, 12) == doctest::Approx(0.1));  // restart
  CHECK(lr_after(s, f.opt, 20) == doctest::Approx(want(8, 16)));
  CHECK(lr_after(s, f.opt, 28) == doctest::Approx(0.1));  // restart

  Fixture g;
  optim::CosineAnnealingWarmRestarts r(g.opt, 5);
  CHECK(lr_after(r, g.opt, 4) == doctest::Approx(want(4, 5)));
  CHECK(lr_after(r, g.opt, 5) == doctest::Approx(0.1));
  CHECK(lr_after(r, g.opt, 10) == doctest::Approx(0.1));
  CHECK(lr_after(r, g.opt, 12) == doctest::Approx(want(2, 5)));
}

TEST_CASE("schedulers: linear warmup chained to cosine, per group") {
  Fixture f;
  f.opt.add_param_group({.params = {zeros({1})}, .lr = 0.02});
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(f.opt, 10);
  optim::LinearWarmup s(f.opt, 5, 0.1, cosine);
  CHECK(f.opt.param_groups()[0].lr == doctest::Approx(0.01));
  CHECK(f.opt.param_groups()[1].lr == doctest::Approx(0.002));
  CHECK(lr_after(s, f.opt, 2) == doctest::Approx(0.1 * (0.1 + 0.9 * 2 / 5.0)));
  CHECK(lr_after(s, f.opt, 5) == doctest::Approx(0.1));
  CHECK(lr_after(s, f.opt, 8) == doctest::Approx(0.1 * (1 + std::cos(kPi * 3 / 10)) / 2));
  CHECK(f.opt.param_groups()[1].lr == doctest::Approx(0.02 * (1 + std::cos(kPi * 3 / 10)) / 2));
  CHECK(s.get_last_lr().size() == 2);
  s.set_epoch(0);
  CHECK(f.opt.lr() == doctest::Approx(0.01));
}

TEST_CASE("schedulers: OneCycleLR") {
  Fixture f;
  optim::OneCycleLR s(f.opt, 1.0, 100, 0.25, 25.0, 1e4);
  // up_end = 24, total_end = 99.
  auto anneal = [](double a, double b, double pct) { return b + (a - b) / 2 * (1 + std::cos(kPi * pct)); };
  CHECK(f.opt.lr() == doctest::Approx(1.0 / 25));
  CHECK(lr_after(s, f.opt, 12) == doctest::Approx(anneal(0.04, 1.0, 12 / 24.0)));
  CHECK(lr_after(s, f.opt, 24) == doctest::Approx(1.0));
  CHECK(lr_after(s, f.opt, 60) == doctest::Approx(anneal(1.0, 0.04 / 1e4, 36 / 75.0)));
  CHECK(lr_after(s, f.opt, 99) == doctest::Approx(0.04 / 1e4));
}

TEST_CASE("schedulers: ReduceLROnPlateau") {
  Fixture f;
  optim::ReduceLROnPlateau s(f.opt, {.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = 0.02});
  s.step(1.0);  // best
  s.step(0.9);  // better
  for (int i = 0; i < 2; ++i) s.step(0.95);
  CHECK(f.opt.lr() == doctest::Approx(0.1));  // 2 bad epochs: patience not exceeded
  s.step(0.95);
  CHECK(f.opt.lr() == doctest::Approx(0.05));  // 3rd bad epoch
  s.step(0.95);                                // cooldown
  for (int i = 0; i < 3; ++i) s.step(0.95);
  CHECK(f.opt.lr() == doctest::Approx(0.025));
  for (int i = 0; i < 8; ++i) s.step(0.95);
  CHECK(f.opt.lr() == doctest::Approx(0.02));  // floored at min_lr
}

TEST_CASE("schedulers: bad arguments throw") {
  Fixture f;
  CHECK_THROWS_AS(optim::StepLR(f.opt, 0), Error);
  CHECK_THROWS_AS(optim::CosineAnnealingWarmRestarts(f.opt, 4, 0), Error);
  CHECK_THROWS_AS(optim::OneCycleLR(f.opt, 1.0, 100, 1.5), Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(f.opt, 0.1, 10, 0.3, 0.0), doctest::Contains("div_factor"), Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(f.opt, 0.1, 10, 0.3, 25.0, 0.0), doctest::Contains("final_div_factor"), Error);
  CHECK_THROWS_WITH_AS(optim::OneCycleLR(f.opt, -0.1, 10), doctest::Contains("max_lr"), Error);
  CHECK_THROWS_WITH_AS(optim::LinearWarmup(f.opt, 5, -1.0), doctest::Contains("start_factor"), Error);
  optim::LinearWarmup warmup(f.opt, 10, 0.0);
  CHECK_THROWS_WITH_AS(warmup.set_epoch(-5), doctest::Contains("set_epoch(-5)"), Error);
  optim::StepLR negative(f.opt, 1, -0.5);  // PyTorch takes any gamma; an lr below 0 is refused when it comes
  CHECK_THROWS_WITH_AS(negative.step(), doctest::Contains("gives group 0 the lr -0.05"), Error);
  // The optimizer refuses an lr written past the scheduler, at the next step.
  f.p.set_grad(ones({2}));
  f.opt.param_groups()[0].lr = std::nan("");
  CHECK_THROWS_WITH_AS(f.opt.step(), doctest::Contains("SGD: invalid lr nan in group 0"), Error);
  CHECK_THROWS_WITH_AS(f.opt.set_lr(-1.0), doctest::Contains("SGD: invalid lr -1"), Error);
  CHECK(f.p.to_vector<float>() == std::vector<float>{0, 0});
}

// A scheduler takes the lr it starts from from the group's initial_lr, which the first scheduler
// set and the optimizer's state dict keeps: built after load_state_dict, it resumes the same
// schedule (PyTorch's 'initial_lr').
TEST_CASE("schedulers: one built after the optimizer's state is loaded resumes the same schedule") {
  Fixture a;
  optim::CosineAnnealingLR sa(a.opt, 20);
  for (int i = 0; i < 10; ++i) sa.step();
  CHECK(a.opt.lr() == doctest::Approx(0.05));
  Fixture b;
  b.opt.load_state_dict(a.opt.state_dict());
  CHECK(b.opt.param_groups()[0].initial_lr == 0.1);
  optim::CosineAnnealingLR sb(b.opt, 20);
  sb.set_epoch(10);
  CHECK(b.opt.lr() == a.opt.lr());
  sa.step();
  sb.step();
  CHECK(b.opt.lr() == a.opt.lr());
  Fixture fresh;  // no scheduler yet: no initial_lr in the state dict, and loading one without it is fine
  for (const auto& [name, t] : fresh.opt.state_dict()) CHECK(name.find("initial_lr") == std::string::npos);
  b.opt.load_state_dict(fresh.opt.state_dict());
}
