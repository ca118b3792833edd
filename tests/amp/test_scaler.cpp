// GradScaler: the fused unscale-and-check kernel against a plain loop; gradients of about 1e-8
// that vanish in pure f16 and survive under the scaler; an injected inf that skips one step
// bitwise, halves the scale and lets it grow back; unscale_ before clipping; accumulation;
// the state dict; a disabled scaler; and every misuse refused with a clear message.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ops/autocast.h"
#include "amp/grad_scaler.h"
#include "mdl.h"
#include "tests/support/test_util.h"
#include "nn/functional.h"
#include "kernels/amp.h"

using namespace mdl;
namespace F = mdl::nn::functional;
using mdl::test::max_rel_diff;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Sets element i of p's gradient (f32) to v.
void poke_grad(const Tensor& p, int64_t i, float v) { p.grad().data_ptr<float>()[i] = v; }

// A small classifier's parameters and a batch.
struct Toy {
  Tensor w1 = (randn({16, 8}) * 0.3).requires_grad_(), b1 = zeros({16}).requires_grad_();
  Tensor w2 = (randn({4, 16}) * 0.3).requires_grad_(), b2 = zeros({4}).requires_grad_();
  Tensor x = randn({32, 8});
  Tensor y = randint(0, 4, {32});
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor loss() const { return F::cross_entropy(F::linear(relu(F::linear(x, w1, b1)), w2, b2), y); }
};

std::vector<std::vector<float>> snapshot(const std::vector<Tensor>& ps) {
  std::vector<std::vector<float>> s;
  for (const auto& p : ps) s.push_back(p.to_vector<float>());
  return s;
}

}  // namespace

TEST_CASE("amp_unscale_check kernel: multiplies in place and flags inf and NaN, f32 and f64") {
  manual_seed(7);
  for (DType t : {kF32, kF64}) {
    CAPTURE(dtype_name(t));
    const int64_t n = 200003;  // several threaded chunks and a ragged tail
    Tensor g = randn({n}).to(t) * 1024.0;
    const std::vector<double> before = g.to_vector<double>();
    Tensor flag = zeros({});
    kernels::unscale_check(g.device(), g, flag, scalar_tensor(1024.0));
    CHECK(flag.item<float>() == 0.0f);
    const std::vector<double> after = g.to_vector<double>();
    bool exact = true;
    for (int64_t i = 0; i < n; ++i) {
      const double want = t == kF32 ? double(float(before[size_t(i)]) * (1.0f / 1024)) : before[size_t(i)] / 1024;
      exact = exact && after[size_t(i)] == want;
    }
    CHECK(exact);
    for (double bad : {double(kInf), -double(kInf), std::nan("")}) {
      for (int64_t at : {int64_t(0), n / 2, n - 1}) {
        Tensor h = ones({n}, t);
        if (t == kF32) h.data_ptr<float>()[at] = float(bad);
        else h.data_ptr<double>()[at] = bad;
        Tensor f = zeros({});
        kernels::unscale_check(h.device(), h, f, scalar_tensor(2.0));
        CHECK(f.item<float>() == 1.0f);
        CHECK(h.to_vector<double>()[size_t(at == 0 ? 1 : 0)] == 0.5);
      }
    }
    // A flag already set stays set: one flag collects every gradient of a step.
    Tensor f = ones({});
    kernels::unscale_check(g.device(), ones({10}, t), f, ones({}));
    CHECK(f.item<float>() == 1.0f);
  }
  Tensor f = zeros({});
  CHECK_THROWS_WITH_AS(kernels::unscale_check(Device::cpu(), ones({4}, kF16), f, ones({})),
                       doctest::Contains("expected an f32 or f64 gradient, got f16"), Error);
}

TEST_CASE("GradScaler: gradients of about 1e-8 vanish in pure f16 and match f32 under the scaler") {
  manual_seed(8);
  Tensor w0 = randn({4, 8}), x = randn({16, 8});
  auto loss_of = [&](const Tensor& w, const Tensor& in) { return sum(F::linear(in, w)) * 1e-8; };

  // f32 reference: dL/dw[o][i] = 1e-8 * sum_b x[b][i], about 1e-8 to 1e-7.
  Tensor w32 = w0.clone().requires_grad_();
  loss_of(w32, x).backward();
  Tensor ref = w32.grad();
  const double ref_max = std::abs(max(abs(ref)).item<float>());
  CHECK(ref_max > 1e-9);
  CHECK(ref_max < 1e-6);

  // Pure f16 (parameters, activations and gradients in f16, no scaler): every gradient is 0, so
  // SGD leaves the weights where they were.
  Tensor w16 = w0.to(kF16).requires_grad_();
  loss_of(w16, x.to(kF16)).backward();
  REQUIRE(w16.grad().defined());
  CHECK(w16.grad().dtype() == kF16);
  CHECK(max(abs(w16.grad())).to(kF32).item<float>() == 0.0f);
  const auto w16_before = w16.to_vector<float>();
  optim::SGD sgd16({w16}, {.lr = 1e6});
  sgd16.step();
  CHECK(w16.to_vector<float>() == w16_before);

  // Autocast f16 with f32 master weights and the scaler: the scaled gradients live in f16's
  // range, and unscaled they equal the f32 ones within f16 rounding.
  Tensor wm = w0.clone().requires_grad_();
  optim::SGD sgd({wm}, {.lr = 1e6});
  amp::GradScaler scaler;
  Tensor loss;
  {
    amp::AutocastGuard autocast(kF16);
    loss = loss_of(wm, x);
  }
  scaler.scale(loss).backward();
  CHECK(wm.grad().dtype() == kF32);
  scaler.unscale_(sgd);
  CHECK(max_rel_diff(wm.grad(), ref) < 5e-3);
  CHECK(scaler.step(sgd));
  scaler.update();
  CHECK(max_rel_diff(wm - w0, ref * -1e6) < 5e-3);  // the update the f32 run would make
}

TEST_CASE("GradScaler: an inf at step k skips that step bitwise, halves the scale, and it grows back") {
  manual_seed(9);
  Toy toy;
  optim::Adam opt(toy.params(), {.lr = 1e-2});
  amp::GradScaler scaler({.growth_interval = 3});
  const int kBad = 2;
  std::vector<double> scales;
  for (int step = 0; step < 8; ++step) {
    CAPTURE(step);
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kF16);
      loss = toy.loss();
    }
    scaler.scale(loss).backward();
    if (step == kBad) poke_grad(toy.w2, 5, kInf);
    const auto before = snapshot(toy.params());
    const int64_t adam_steps = opt.state(toy.w1) ? opt.state(toy.w1)->steps() : 0;
    const bool stepped = scaler.step(opt);
    CHECK(stepped == (step != kBad));
    if (step == kBad) {
      CHECK(snapshot(toy.params()) == before);  // bitwise
      CHECK(opt.state(toy.w1)->steps() == adam_steps);
    } else {
      CHECK(snapshot(toy.params()) != before);
    }
    scaler.update();
    scales.push_back(scaler.get_scale());
  }
  // Steps 0, 1 clean (tracker 1, 2); step 2 inf: halve; steps 3, 4, 5 clean: grow at 5.
  CHECK(scales == std::vector<double>{65536, 65536, 32768, 32768, 32768, 65536, 65536, 65536});
  CHECK(scaler.skipped_steps() == 1);
  CHECK(opt.step_count() == 7);
}

TEST_CASE("GradScaler: a NaN is caught like an inf") {
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(toy.loss()).backward();
  poke_grad(toy.b1, 0, std::nanf(""));
  CHECK_FALSE(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == 32768);
}

TEST_CASE("GradScaler: a scale too large for f16 overflows, and the scaler backs off until steps go through") {
  manual_seed(10);
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = std::ldexp(1.0, 40)});
  int skipped = 0;
  bool stepped = false;
  for (int i = 0; i < 40 && !stepped; ++i) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kF16);
      loss = toy.loss();
    }
    scaler.scale(loss).backward();  // the f16 activation gradients exceed 65504
    stepped = scaler.step(opt);
    skipped += stepped ? 0 : 1;
    scaler.update();
  }
  CHECK(stepped);
  CHECK(skipped >= 10);
  CHECK(scaler.skipped_steps() == skipped);
  CHECK(scaler.get_scale() == std::ldexp(1.0, 40 - skipped));
}

TEST_CASE("GradScaler: unscale_ then clip_grad_norm_ clips the true gradients") {
  manual_seed(11);
  Toy ref_toy;
  Toy toy;
  for (size_t i = 0; i < 4; ++i) {
    NoGradGuard no_grad;
    toy.params()[i].copy_(ref_toy.params()[i]);
  }
  toy.x = ref_toy.x;
  toy.y = ref_toy.y;
  // f32 reference: backward, clip to a norm below the gradients' own, step.
  optim::SGD ref_opt(ref_toy.params(), {.lr = 0.5});
  ref_toy.loss().backward();
  const double ref_norm = optim::clip_grad_norm_(ref_toy.params(), 0.05);
  REQUIRE(ref_norm > 0.05);
  ref_opt.step();

  optim::SGD opt(toy.params(), {.lr = 0.5});
  amp::GradScaler scaler;
  scaler.scale(toy.loss()).backward();
  scaler.unscale_(opt);
  const double norm = optim::clip_grad_norm_(toy.params(), 0.05);
  CHECK(norm == doctest::Approx(ref_norm).epsilon(1e-5));
  CHECK(scaler.step(opt));  // does not unscale a second time
  scaler.update();
  for (size_t i = 0; i < 4; ++i) CHECK(max_rel_diff(toy.params()[i], ref_toy.params()[i]) < 1e-5);

  // The common mistake, for contrast: clipping before unscale_ sees the norm times the scale.
  opt.zero_grad();
  scaler.scale(toy.loss()).backward();
  CHECK(optim::clip_grad_norm_(toy.params(), 1e30) > 1000 * ref_norm);
}

TEST_CASE("GradScaler: with accumulation, each micro-batch loss divided by k gives the full batch's gradient") {
  manual_seed(12);
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  toy.loss().backward();
  const auto full = snapshot({toy.w1.grad(), toy.w2.grad()});
  opt.zero_grad();

  amp::GradScaler scaler;
  const int64_t k = 4;
  const Tensor x = toy.x, y = toy.y;
  for (int64_t i = 0; i < k; ++i) {
    toy.x = x.narrow(0, i * 8, 8);
    toy.y = y.narrow(0, i * 8, 8);
    scaler.scale(toy.loss() / double(k)).backward();
  }
  scaler.unscale_(opt);
  CHECK(max_rel_diff(toy.w1.grad(), from_vector(full[0], toy.w1.shape())) < 1e-5);
  CHECK(max_rel_diff(toy.w2.grad(), from_vector(full[1], toy.w2.shape())) < 1e-5);
  CHECK(scaler.step(opt));
  scaler.update();
}

TEST_CASE("GradScaler: several optimizers share one update") {
  Toy toy;
  optim::SGD a({toy.w1, toy.b1}, {.lr = 0.1}), b({toy.w2, toy.b2}, {.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(toy.loss()).backward();
  poke_grad(toy.w2, 0, kInf);
  CHECK(scaler.step(a));
  CHECK_FALSE(scaler.step(b));
  scaler.update();
  CHECK(scaler.get_scale() == 32768);
}

// update(new_scale) sets the scale and leaves the growth tracker counting, as PyTorch's does.
TEST_CASE("GradScaler: update(new_scale) keeps the growth tracker") {
  amp::GradScaler s({.init_scale = 1024, .growth_interval = 3});
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  auto clean_step = [&](std::optional<double> new_scale) {
    opt.zero_grad();
    s.scale(toy.loss()).backward();
    s.step(opt);
    if (new_scale) s.update(*new_scale);
    else s.update();
  };
  clean_step(std::nullopt);
  clean_step(std::nullopt);
  CHECK(s.growth_tracker() == 2);
  clean_step(4.0);
  CHECK(s.get_scale() == 4.0);
  CHECK(s.growth_tracker() == 2);
  clean_step(std::nullopt);  // the third clean step in a row: grows
  CHECK(s.get_scale() == 8.0);
  CHECK(s.growth_tracker() == 0);
}

TEST_CASE("GradScaler: a step skipped for an inf counts as skipped when update(new_scale) follows it") {
  amp::GradScaler s({.init_scale = 1024});
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  s.scale(toy.loss()).backward();
  poke_grad(toy.w1, 0, kInf);
  CHECK_FALSE(s.step(opt));
  s.update(1024.0);
  CHECK(s.skipped_steps() == 1);
  opt.zero_grad();
  s.scale(toy.loss()).backward();
  CHECK(s.step(opt));
  s.update(512.0);
  CHECK(s.skipped_steps() == 1);
}

TEST_CASE("GradScaler: load_state_dict between unscale_ and step leaves the gradients unscaled once") {
  amp::GradScaler s({.init_scale = 1024});
  Tensor w = full({1}, 0.0).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  s.scale(sum(w * 1.0)).backward();  // gradient 1, scaled: 1024
  s.unscale_(opt);
  CHECK(w.grad().item<float>() == 1.0f);
  s.load_state_dict(amp::GradScaler({.init_scale = 1024}).state_dict());
  CHECK(s.step(opt));
  CHECK(w.grad().item<float>() == 1.0f);
  CHECK(w.item<float>() == doctest::Approx(-0.1f));
  s.update();
}

TEST_CASE("GradScaler: state dict round trip, and a disabled scaler passes everything through") {
  amp::GradScaler s({.init_scale = 1024, .growth_interval = 5});
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    s.scale(toy.loss()).backward();
    if (i == 1) poke_grad(toy.w1, 0, kInf);
    s.step(opt);
    s.update();
  }
  amp::GradScaler t;
  t.load_state_dict(s.state_dict());
  CHECK(t.get_scale() == 512);
  CHECK(t.growth_tracker() == 1);
  CHECK(t.skipped_steps() == 1);
  CHECK(t.state_dict().size() == 6);

  amp::GradScaler off({.enabled = false});
  Tensor loss = toy.loss();
  CHECK(off.scale(loss).is_same(loss));
  CHECK(off.get_scale() == 1.0);
  CHECK(off.state_dict().empty());
  opt.zero_grad();
  loss.backward();
  const auto before = snapshot(toy.params());
  CHECK(off.step(opt));
  CHECK(snapshot(toy.params()) != before);
  off.update();
  CHECK_THROWS_WITH_AS(off.load_state_dict(s.state_dict()), doctest::Contains("disabled"), Error);
}

TEST_CASE("GradScaler: an f16 loss is scaled in f32, where 65536 times it does not overflow") {
  amp::GradScaler s;
  Tensor loss = full({}, 2.0, kF16);
  Tensor scaled = s.scale(loss);
  CHECK(scaled.dtype() == kF32);
  CHECK(scaled.item<float>() == 131072.0f);
}

TEST_CASE("GradScaler: misuse is refused with a clear message") {
  Toy toy;
  optim::SGD opt(toy.params(), {.lr = 0.1});
  SUBCASE("bad options") {
    CHECK_THROWS_WITH_AS(amp::GradScaler({.init_scale = 0}), doctest::Contains("init_scale"), Error);
    CHECK_THROWS_WITH_AS(amp::GradScaler({.growth_factor = 1.0}), doctest::Contains("growth_factor"), Error);
    CHECK_THROWS_WITH_AS(amp::GradScaler({.backoff_factor = 1.5}), doctest::Contains("backoff_factor"), Error);
    CHECK_THROWS_WITH_AS(amp::GradScaler({.growth_interval = 0}), doctest::Contains("growth_interval"), Error);
  }
  SUBCASE("unscale_ twice, unscale_ after step, step twice, update before any step") {
    amp::GradScaler s;
    CHECK_THROWS_WITH_AS(s.update(), doctest::Contains("no inf checks were recorded"), Error);
    s.scale(toy.loss()).backward();
    s.unscale_(opt);
    CHECK_THROWS_WITH_AS(s.unscale_(opt), doctest::Contains("already called on this optimizer"), Error);
    s.step(opt);
    CHECK_THROWS_WITH_AS(s.unscale_(opt), doctest::Contains("after step()"), Error);
    CHECK_THROWS_WITH_AS(s.step(opt), doctest::Contains("step: already called"), Error);
    s.update();
    CHECK_THROWS_WITH_AS(s.update(0.0), doctest::Contains("new_scale"), Error);
  }
  SUBCASE("a step with no gradient at all (a backward forgotten) is not a clean step") {
    amp::GradScaler s;
    opt.zero_grad(true);
    for (const Tensor& p : toy.params()) CHECK_FALSE(p.grad().defined());
    CHECK_THROWS_WITH_AS(s.step(opt), doctest::Contains("no parameter of this optimizer has a gradient"), Error);
    CHECK_THROWS_WITH_AS(s.unscale_(opt), doctest::Contains("no parameter of this optimizer has a gradient"), Error);
    CHECK(s.get_scale() == amp::GradScalerOptions{}.init_scale);
  }
  SUBCASE("f16 gradients: master weights must be f32, and nothing is unscaled") {
    Tensor w16 = randn({3, 3}).to(kF16).requires_grad_();
    Tensor w32 = randn({3}).requires_grad_();
    optim::SGD opt16({w32, w16}, {.lr = 0.1});
    amp::GradScaler s({.init_scale = 8});  // 65536 itself is not an f16 number
    s.scale(sum(matmul(w16, w32.to(kF16)))).backward();
    const auto g32 = w32.grad().to_vector<float>();
    CHECK_THROWS_WITH_AS(s.unscale_(opt16), doctest::Contains("is f16; unscaling needs f32 master weights"), Error);
    CHECK(w32.grad().to_vector<float>() == g32);
  }
  SUBCASE("scale of a non-floating or undefined loss; a bad state dict") {
    amp::GradScaler s;
    CHECK_THROWS_WITH_AS(s.scale(Tensor()), doctest::Contains("undefined"), Error);
    CHECK_THROWS_WITH_AS(s.scale(ones({}, kI64)), doctest::Contains("floating loss"), Error);
    CHECK_THROWS_WITH_AS(s.load_state_dict({}), doctest::Contains("empty"), Error);
    CHECK_THROWS_WITH_AS(s.load_state_dict({{"scale", scalar_tensor(2.0, kF64)}}),
                         doctest::Contains("missing 'growth_factor'"), Error);
    NamedTensors bad = s.state_dict();
    bad[0].second = scalar_tensor(-1.0, kF64);
    CHECK_THROWS_WITH_AS(s.load_state_dict(bad), doctest::Contains("init_scale must be positive"), Error);
  }
}
