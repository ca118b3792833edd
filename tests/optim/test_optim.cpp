// Optimizers against independent double-precision references written from PyTorch's formulas
// (SGD with momentum/dampening/nesterov/weight decay, Adam, AdamW, AMSGrad), parameter groups,
// f16 parameters, state dicts that resume bit-identically, clipping, l2_penalty and accumulation.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "mdl.h"
#include "optim/accumulate.h"
#include "optim/adam.h"
#include "switches/list/toggles.h"
#include "optim/clip.h"
#include "optim/regularization.h"
#include "optim/sgd.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
using Vec = std::vector<double>;

namespace {

const Vec kP0 = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75};
// The gradient fed at step t (1-based): varies in size and sign so that AMSGrad's max matters.
Vec grad_at(int t) {
  Vec g(kP0.size());
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = (t == 1 ? 3.0 : 0.4 / t) * std::sin(1.0 + 1.7 * double(i) + t) + 0.05 * t;
  return g;
}

Tensor param_from(const Vec& v, DType t = kF32) {
  std::vector<float> f(v.begin(), v.end());
  return from_vector(f, {2, 3}).to(t);
}
void set_grad_at(const Tensor& p, int t) { p.set_grad(param_from(grad_at(t), p.dtype())); }

// The reference SGD of torch.optim.SGD:
//   g = grad + wd * p; buf = g (first step) else momentum * buf + (1 - dampening) * g;
//   g = nesterov ? g + momentum * buf : buf;  p -= lr * g.
Vec ref_sgd(int steps, double lr, double mom, double damp, double wd, bool nesterov) {
  Vec p = kP0, buf(p.size());
  for (int t = 1; t <= steps; ++t) {
    Vec g0 = grad_at(t);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = double(float(g0[i])) + wd * p[i];
      if (mom != 0) {
        buf[i] = t == 1 ? g : mom * buf[i] + (1 - damp) * g;
        g = nesterov ? g + mom * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
  return p;
}

// The reference Adam/AdamW of torch.optim.Adam/AdamW:
//   AdamW: p *= 1 - lr * wd;  Adam: g += wd * p
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  vmax = max(vmax, v) (amsgrad)
//   p -= lr / (1 - b1^t) * m / (sqrt(v or vmax) / sqrt(1 - b2^t) + eps)
Vec ref_adam(int steps, double lr, double b1, double b2, double eps, double wd, bool decoupled, bool amsgrad) {
  Vec p = kP0, m(p.size()), v(p.size()), vmax(p.size());
  for (int t = 1; t <= steps; ++t) {
    Vec g0 = grad_at(t);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = double(float(g0[i]));
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      double denom = std::sqrt(amsgrad ? vmax[i] : v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
  return p;
}

template <class Opt>
Vec run_steps(Opt& opt, const Tensor& p, int steps) {
  for (int t = 1; t <= steps; ++t) {
    set_grad_at(p, t);
    opt.step();
  }
  return values(p);
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mdl_optim_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("optim: SGD matches torch.optim.SGD's formulas") {
  struct Case {
    double lr, mom, damp, wd;
    bool nesterov;
  };
  for (Case c : {Case{0.1, 0, 0, 0, false}, Case{0.1, 0, 0, 0.05, false}, Case{0.05, 0.9, 0, 0, false},
                 Case{0.05, 0.9, 0.3, 0.01, false}, Case{0.05, 0.9, 0, 0.02, true}}) {
    CAPTURE(c.mom);
    CAPTURE(c.damp);
    CAPTURE(c.wd);
    CAPTURE(c.nesterov);
    Tensor p = param_from(kP0);
    optim::SGD opt({p},
                   {.lr = c.lr, .momentum = c.mom, .dampening = c.damp, .weight_decay = c.wd, .nesterov = c.nesterov});
    check_close(run_steps(opt, p, 4), ref_sgd(4, c.lr, c.mom, c.damp, c.wd, c.nesterov), {.rtol = 1e-6, .atol = 1e-7});
    CHECK(opt.step_count() == 4);
  }
}

// Without weight decay no decay term is added, as in PyTorch: 0 * an infinite parameter would be NaN.
TEST_CASE("optim: an infinite parameter stays infinite under SGD and Adam without weight decay") {
  const bool was_fused = toggles::fused_adamw();
  const float inf = std::numeric_limits<float>::infinity();
  auto step_once = [&](optim::Optimizer& opt, Tensor& p) {
    p.set_grad(from_vector<float>({1.f, 1.f, 1.f}));
    opt.step();
    return values(p);
  };
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    Tensor p = from_vector<float>({inf, -inf, 1.f}).requires_grad_();
    optim::SGD opt({p}, {.lr = 0.1, .momentum = nesterov ? 0.9 : 0.0, .nesterov = nesterov});
    for (int i = 0; i < 2; ++i) {
      const Vec got = step_once(opt, p);
      CHECK(got[0] == inf);
      CHECK(got[1] == -inf);
      CHECK(std::isfinite(got[2]));
    }
  }
  for (bool fused : {true, false}) {
    CAPTURE(fused);
    toggles::set_fused_adamw(fused);
    Tensor p = from_vector<float>({inf, -inf, 1.f}).requires_grad_();
    optim::Adam opt({p}, {.lr = 0.1});
    const Vec got = step_once(opt, p);
    CHECK(got[0] == inf);
    CHECK(got[1] == -inf);
    CHECK(got[2] == doctest::Approx(0.9).epsilon(1e-6));
  }
  toggles::set_fused_adamw(was_fused);
}

TEST_CASE("optim: Adam and AdamW match torch.optim's formulas, with weight decay and amsgrad, fused or composed") {
  const bool was_fused = toggles::fused_adamw();
  for (bool fused : {true, false})
    for (bool decoupled : {false, true})
      for (bool amsgrad : {false, true})
        for (double wd : {0.0, 0.1})
          for (double beta2 : {0.95, 0.99999}) {  // 1 - float(0.99999) is 1.00136e-5: 1 - beta2 from the double
            toggles::set_fused_adamw(fused);      // off: the update composed of tensor ops
            CAPTURE(fused);
            CAPTURE(decoupled);
            CAPTURE(amsgrad);
            CAPTURE(wd);
            CAPTURE(beta2);
            Tensor p = param_from(kP0);
            Vec got;
            if (decoupled) {
              optim::AdamW opt(
                  {p}, {.lr = 0.05, .betas = {0.8, beta2}, .eps = 1e-6, .weight_decay = wd, .amsgrad = amsgrad});
              got = run_steps(opt, p, 5);
            } else {
              optim::Adam opt({p},
                              {.lr = 0.05, .betas = {0.8, beta2}, .eps = 1e-6, .weight_decay = wd, .amsgrad = amsgrad});
              got = run_steps(opt, p, 5);
            }
            check_close(got, ref_adam(5, 0.05, 0.8, beta2, 1e-6, wd, decoupled, amsgrad), {.rtol = 1e-6, .atol = 1e-7});
          }
  toggles::set_fused_adamw(was_fused);
  CHECK(toggles::fused_adamw());
}

TEST_CASE("optim: fused_adamw off: the composed update on f16, f64 and large odd-sized parameters, with grad_scale") {
  const bool was_fused = toggles::fused_adamw();
  for (DType t : {kF32, kF16, kBF16, kF64})
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(300007)}) {
      CAPTURE(t);
      CAPTURE(n);
      Generator gen(21);
      const Tensor p0 = randn({n}, {}, &gen).to(t), g0 = (randn({n}, {}, &gen) * 64.0).to(t);
      std::vector<double> got[2];
      for (bool fused : {false, true}) {
        toggles::set_fused_adamw(fused);
        Tensor p = p0.clone();
        optim::AdamW opt({p}, {.lr = 0.05, .weight_decay = 0.1, .amsgrad = true});
        for (int step = 0; step < 3; ++step) {
          p.set_grad(g0 * double(3 - step));  // a falling second moment: AMSGrad's max matters
          opt.step(1.0 / 64.0);
        }
        CHECK(p.dtype() == t);
        got[fused] = values(p);
      }
      // The two compute the same formula in a different order: equal to a rounding of the parameter.
      const double tol = t == kF64 || t == kF32 ? 1e-5 : t == kF16 ? 2e-3 : 1.6e-2;
      int bad = 0;
      for (size_t i = 0; i < got[0].size(); ++i)
        bad += std::abs(got[0][i] - got[1][i]) > tol * (1 + std::abs(got[1][i]));
      CHECK(bad == 0);
      if (t == kF32 && n > 1000) CHECK(got[0] != got[1]);  // different code: they differ in rounding somewhere
    }
  toggles::set_fused_adamw(was_fused);
  CHECK(toggles::fused_adamw());
}

TEST_CASE("optim: AMSGrad differs from Adam when the second moment falls") {
  Tensor a = param_from(kP0), b = param_from(kP0);
  optim::Adam plain({a}, {.lr = 0.05}), ams({b}, {.lr = 0.05, .amsgrad = true});
  Vec va = run_steps(plain, a, 4), vb = run_steps(ams, b, 4);
  CHECK(va != vb);
  REQUIRE(ams.state(b));
  CHECK(ams.state(b)->max_exp_avg_sq.defined());
  CHECK_FALSE(plain.state(a)->max_exp_avg_sq.defined());
}

// A module registered under two names (tied weights) lists its parameter once in parameters(), as
// PyTorch's does; a parameter twice in one group is refused (it would be stepped twice, and on the
// GPU by two blocks at once).
TEST_CASE("optim: a tied parameter is handed over once, and one twice in a group is refused") {
  struct Tied : nn::Module {
    Tied() : nn::Module("Tied") {
      auto a = register_module("a", std::make_shared<nn::Linear>(4, 4, false));
      register_module("b", a);
    }
  } net;
  CHECK(net.named_parameters().size() == 2);  // both names, as a state dict keeps them
  REQUIRE(net.parameters().size() == 1);
  CHECK(net.num_parameters() == 16);
  optim::Adam adam(net.parameters(), {.lr = 0.1});
  const auto groups = optim::param_groups_no_decay(net.named_parameters(), 0.1);
  CHECK(groups[0].params.size() + groups[1].params.size() == 1);
  optim::AdamW adamw(groups, {.lr = 0.1});
  Tensor w = param_from(kP0);
  CHECK_THROWS_WITH_AS(optim::SGD({w, w}, {.lr = 0.1}), doctest::Contains("appears twice in group 0"), Error);
}

TEST_CASE("optim: AdamW defaults and per-group options") {
  Tensor w = param_from(kP0), bias = param_from(kP0).flatten();
  NamedTensors named = {{"fc.weight", w}, {"fc.bias", bias}};
  auto groups = optim::param_groups_no_decay(named, 0.1);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].params.size() == 1);
  CHECK(groups[0].params[0].is_same(w));
  CHECK(groups[1].params[0].is_same(bias));
  CHECK(groups[1].weight_decay == 0.0);
  optim::AdamW opt(groups, {.lr = 0.05, .betas = {0.8, 0.95}, .eps = 1e-6});
  CHECK(opt.param_groups()[0].weight_decay == 0.1);
  CHECK(opt.param_groups()[0].lr == 0.05);
  CHECK(opt.param_groups()[1].beta1 == 0.8);
  set_grad_at(w, 1);
  bias.set_grad(param_from(grad_at(1)).flatten());
  opt.step();
  check_close(w, ref_adam(1, 0.05, 0.8, 0.95, 1e-6, 0.1, true, false), {.rtol = 1e-6, .atol = 1e-7});
  check_close(bias, ref_adam(1, 0.05, 0.8, 0.95, 1e-6, 0.0, true, false), {.rtol = 1e-6, .atol = 1e-7});

  optim::AdamW defaults({param_from(kP0)});
  CHECK(defaults.lr() == 1e-3);
  CHECK(defaults.param_groups()[0].weight_decay == 1e-2);
  CHECK(defaults.param_groups()[0].beta2 == 0.999);
  defaults.set_lr(0.5);
  CHECK(defaults.param_groups()[0].lr == 0.5);
}

TEST_CASE("optim: a second group with its own lr; params without grad are skipped; versions bump") {
  Tensor a = param_from(kP0), b = param_from(kP0), c = param_from(kP0);
  optim::SGD opt({a}, {.lr = 0.1});
  opt.add_param_group({.params = {b, c}, .lr = 0.01});
  CHECK(opt.param_groups()[1].momentum == 0.0);
  set_grad_at(a, 1);
  set_grad_at(b, 1);
  uint64_t va = a.version(), vc = c.version();
  opt.step();
  check_close(a, ref_sgd(1, 0.1, 0, 0, 0, false), {.rtol = 1e-6, .atol = 1e-7});
  check_close(b, ref_sgd(1, 0.01, 0, 0, 0, false), {.rtol = 1e-6, .atol = 1e-7});
  CHECK(values(c) == values(param_from(kP0)));
  CHECK(a.version() > va);
  CHECK(c.version() == vc);
  CHECK(opt.state(c) == nullptr);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_THROWS_AS(opt.add_param_group({.params = {a}}), Error);
}

TEST_CASE("optim: grad_scale multiplies the grads first") {
  Tensor a = param_from(kP0), b = param_from(kP0);
  optim::Adam oa({a}, {.lr = 0.05, .weight_decay = 0.1}), ob({b}, {.lr = 0.05, .weight_decay = 0.1});
  set_grad_at(a, 1);
  b.set_grad(param_from(grad_at(1)) * 1024.0);
  oa.step();
  ob.step(1.0 / 1024.0);
  CHECK(values(a) == values(b));
}

TEST_CASE("optim: f16 and bf16 parameters keep f32 state and round once per step") {
  for (DType t : {kF16, kBF16}) {
    CAPTURE(t);
    Tensor h = param_from(kP0, t);
    Tensor f = h.to(kF32).clone();
    optim::AdamW oh({h}, {.lr = 0.05, .weight_decay = 0.1}), of({f}, {.lr = 0.05, .weight_decay = 0.1});
    h.set_grad(param_from(grad_at(1), t));
    f.set_grad(h.grad().to(kF32));
    oh.step();
    of.step();
    CHECK(oh.state(h)->exp_avg.dtype() == kF32);
    CHECK(values(h) == values(f.to(t)));
    CHECK(values(oh.state(h)->exp_avg_sq) == values(of.state(f)->exp_avg_sq));
  }
}

TEST_CASE("optim: f64 parameters update in double") {
  Tensor p = param_from(kP0, kF64);
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  check_close(run_steps(opt, p, 3), ref_sgd(3, 0.1, 0.9, 0, 0.01, false), {.rtol = 1e-6, .atol = 1e-7});
}

TEST_CASE("optim: save/load mid-training resumes bit-identically") {
  auto make_params = [] {
    return std::vector<Tensor>{param_from(kP0), param_from(kP0).flatten().slice(0, 0, 4).contiguous()};
  };
  auto feed = [](const std::vector<Tensor>& ps, int t) {
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].set_grad(
          param_from(grad_at(t + int(i))).flatten().slice(0, 0, ps[i].numel()).reshape(ps[i].shape()).contiguous());
  };
  auto run = [&](auto make_opt, const std::string& tag) {
    // Uninterrupted: 6 steps.
    auto ref = make_params();
    auto opt_ref = make_opt(ref);
    for (int t = 1; t <= 6; ++t) {
      feed(ref, t);
      opt_ref->step();
    }
    // Interrupted after 3: save weights and state, rebuild everything, load, go on.
    auto a = make_params();
    auto opt_a = make_opt(a);
    for (int t = 1; t <= 3; ++t) {
      feed(a, t);
      opt_a->step();
    }
    std::string path = temp_file(tag + ".safetensors");
    opt_a->save(path);
    auto b = make_params();
    for (size_t i = 0; i < b.size(); ++i) b[i].copy_(a[i]);
    auto opt_b = make_opt(b);
    opt_b->load(path);
    std::filesystem::remove(path);
    CHECK(opt_b->step_count() == 3);
    for (int t = 4; t <= 6; ++t) {
      feed(b, t);
      opt_b->step();
    }
    for (size_t i = 0; i < b.size(); ++i) CHECK(values(b[i]) == values(ref[i]));
  };
  run(
      [](const std::vector<Tensor>& ps) {
        return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
      },
      "sgd");
  run(
      [](const std::vector<Tensor>& ps) {
        return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 0.05, .weight_decay = 0.1, .amsgrad = true});
      },
      "adam");
  run(
      [](const std::vector<Tensor>& ps) {
        auto opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{ps[0]}, optim::AdamWOptions{.lr = 0.05});
        opt->add_param_group({.params = {ps[1]}, .lr = 0.02, .weight_decay = 0.0});
        return opt;
      },
      "adamw");
}

TEST_CASE("optim: state dict restores hyperparameters; mismatches are named") {
  Tensor p = param_from(kP0);
  optim::Adam opt({p}, {.lr = 0.05});
  set_grad_at(p, 1);
  opt.step();
  opt.set_lr(0.123);
  NamedTensors sd = opt.state_dict();
  Tensor q = param_from(kP0);
  optim::Adam other({q}, {.lr = 0.9});
  other.load_state_dict(sd);
  CHECK(other.lr() == 0.123);
  CHECK(other.step_count() == 1);
  CHECK(values(other.state(q)->exp_avg) == values(opt.state(p)->exp_avg));

  optim::Adam two({param_from(kP0), param_from(kP0)});
  CHECK_THROWS_WITH_AS(two.load_state_dict(sd), doctest::Contains("group 0 has 2 parameters"), Error);
  Tensor wrong = zeros({3, 2});
  optim::Adam shaped({wrong});
  CHECK_THROWS_WITH_AS(shaped.load_state_dict(sd), doctest::Contains("shape"), Error);
  NamedTensors missing(sd.begin() + 1, sd.end());
  CHECK_THROWS_WITH_AS(other.load_state_dict(missing), doctest::Contains("missing \"step\""), Error);
}

TEST_CASE("optim: clip_grad_norm_ scales by the global L2 norm") {
  Tensor a = param_from(kP0), b = zeros({4});
  a.set_grad(from_vector<float>({3, 0, 0, 0, 0, 0}, {2, 3}));
  b.set_grad(from_vector<float>({0, 4, 0, 0}, {4}));
  Tensor c = zeros({2});  // no grad: skipped
  double norm = optim::clip_grad_norm_({a, b, c}, 1.0);
  CHECK(norm == doctest::Approx(5.0));
  CHECK(a.grad().to_vector<float>()[0] == doctest::Approx(3.0 / (5.0 + 1e-6)));
  CHECK(b.grad().to_vector<float>()[1] == doctest::Approx(4.0 / (5.0 + 1e-6)));
  // Below max_norm: untouched.
  CHECK(optim::clip_grad_norm_({a, b}, 10.0) == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(b.grad().to_vector<float>()[1] == doctest::Approx(0.8).epsilon(1e-5));
  // A big f16 gradient: norm accumulated in f64 across many elements.
  Tensor h = zeros({100000}, kF16);
  h.set_grad(full({100000}, 0.5, kF16));
  CHECK(optim::clip_grad_norm_({h}, 1e9) == doctest::Approx(std::sqrt(100000 * 0.25)));
}

TEST_CASE("optim: clip_grad_norm_ leaves non-finite grads untouched or throws") {
  Tensor a = param_from(kP0);
  a.set_grad(from_vector<float>({1, std::numeric_limits<float>::infinity(), 0, 0, 0, 0}, {2, 3}));
  double norm = optim::clip_grad_norm_({a}, 1.0);
  CHECK(std::isinf(norm));
  CHECK(a.grad().to_vector<float>()[0] == 1.0f);
  a.set_grad(from_vector<float>({1, std::nanf(""), 0, 0, 0, 0}, {2, 3}));
  CHECK(std::isnan(optim::clip_grad_norm_({a}, 1.0)));
  CHECK(a.grad().to_vector<float>()[0] == 1.0f);
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_({a}, 1.0, true), doctest::Contains("non-finite"), Error);
}

TEST_CASE("optim: clip_grad_norm_on_device_ clips as clip_grad_norm_ does, deciding on the device") {
  // Norms below, above and at max_norm, inf and NaN: the same norm and the same grads, bit for bit.
  const float kInf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& g0 : std::vector<std::vector<float>>{{3, 0, 0, 0, 0, 4},
                                                                      {0.3f, 0, 0, 0, 0, 0.4f},
                                                                      {0.6f, 0, 0, 0, 0, 0.8f},
                                                                      {1, kInf, 0, 0, 0, 0},
                                                                      {1, std::nanf(""), 0, 0, 0, 0}}) {
    CAPTURE(g0[0]);
    Tensor a = param_from(kP0), b = param_from(kP0);
    a.set_grad(from_vector(g0, {2, 3}));
    b.set_grad(from_vector(g0, {2, 3}));
    const double host = optim::clip_grad_norm_({a}, 1.0);
    const Tensor device = optim::clip_grad_norm_on_device_({b}, 1.0);
    CHECK(device.dtype() == kF64);
    const double d = device.item<double>();
    CHECK((d == host || (std::isnan(d) && std::isnan(host))));
    CHECK(a.grad().to_vector<float>()[0] == b.grad().to_vector<float>()[0]);
    CHECK(a.grad().to_vector<float>()[5] == b.grad().to_vector<float>()[5]);
  }
  Tensor c = zeros({2});
  CHECK_FALSE(optim::clip_grad_norm_on_device_({c}, 1.0).defined());
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_on_device_({c}, -1.0), doctest::Contains("invalid max_norm"), Error);
}

TEST_CASE("optim: clip_grad_value_ clamps each element") {
  Tensor a = param_from(kP0);
  a.set_grad(from_vector<float>({-3, -0.5, 0, 0.5, 2, 0.99f}, {2, 3}));
  optim::clip_grad_value_({a}, 1.0);
  CHECK(a.grad().to_vector<float>() == std::vector<float>{-1, -0.5, 0, 0.5, 1, 0.99f});
}

TEST_CASE("optim: l2_penalty as a loss term equals SGD's weight_decay") {
  const double wd = 0.1;
  Tensor x = from_vector<float>({0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f}, {2, 3});
  Tensor p1 = param_from(kP0).requires_grad_(), p2 = param_from(kP0).requires_grad_();
  Tensor bias1 = zeros({3}).requires_grad_(), bias2 = zeros({3}).requires_grad_();
  // Penalty on the weight only ("dense layers"): the bias gets no decay in either run.
  optim::SGD with_decay({p1}, {.lr = 0.1, .momentum = 0.9, .weight_decay = wd});
  with_decay.add_param_group({.params = {bias1}, .weight_decay = 0.0});
  optim::SGD with_penalty({p2, bias2}, {.lr = 0.1, .momentum = 0.9});
  CHECK(optim::l2_penalty({p2}, wd).item<float>() == doctest::Approx(wd / 2 * [] {
          double s = 0;
          for (double v : kP0) s += v * v;
          return s;
        }()));
  for (int t = 0; t < 3; ++t) {
    with_decay.zero_grad();
    sum(square(p1 * x + bias1)).backward();
    with_decay.step();
    with_penalty.zero_grad();
    (sum(square(p2 * x + bias2)) + optim::l2_penalty({p2}, wd)).backward();
    with_penalty.step();
  }
  check_close(p2, p1, {.rtol = 1e-6, .atol = 1e-7});
  check_close(bias2, bias1, {.rtol = 1e-6, .atol = 1e-7});
}

TEST_CASE("optim: k micro-batches of b give the update of one batch of k*b") {
  manual_seed(3);
  Tensor x = randn({8, 3}), y = randn({8, 2});
  Tensor w0 = randn({3, 2}), b0 = randn({2});
  auto model_loss = [](const Tensor& w, const Tensor& b, const Tensor& xs, const Tensor& ys) {
    return mean(square(matmul(xs, w) + b - ys));
  };
  Tensor w1 = w0.clone().requires_grad_(), b1 = b0.clone().requires_grad_();
  Tensor w2 = w0.clone().requires_grad_(), b2 = b0.clone().requires_grad_();
  optim::Adam full_batch({w1, b1}, {.lr = 0.01}), micro({w2, b2}, {.lr = 0.01});
  for (int it = 0; it < 3; ++it) {
    full_batch.zero_grad();
    Tensor l = model_loss(w1, b1, x, y);
    l.backward();
    full_batch.step();
    Tensor lm = optim::accumulate_step(
        micro, 4, [&](int64_t i) { return model_loss(w2, b2, x.narrow(0, 2 * i, 2), y.narrow(0, 2 * i, 2)); });
    CHECK(lm.item<float>() == doctest::Approx(l.item<float>()).epsilon(1e-5));
  }
  check_close(w2, w1, {.rtol = 1e-5, .atol = 1e-7});
  check_close(b2, b1, {.rtol = 1e-5, .atol = 1e-7});
}

TEST_CASE("optim: bad options throw naming the optimizer") {
  Tensor p = param_from(kP0);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = -1}), doctest::Contains("SGD: invalid lr -1"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({p}, {.lr = 0.1, .nesterov = true}), doctest::Contains("nesterov"), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW({p}, {.betas = {1.0, 0.9}}), doctest::Contains("AdamW: invalid betas"), Error);
  CHECK_THROWS_AS(optim::Adam({zeros({2}, kI64)}), Error);
  CHECK_THROWS_WITH_AS(optim::SGD(std::vector<Tensor>{}, {.lr = 0.1}), doctest::Contains("SGD: got an empty parameter"),
                       Error);
  CHECK_THROWS_WITH_AS(optim::AdamW(std::vector<optim::ParamGroup>{{}, {}}), doctest::Contains("empty parameter"),
                       Error);
  optim::SGD opt({p}, {.lr = 0.1});
  CHECK_THROWS_AS(p.set_grad(zeros({3})), Error);
}

TEST_CASE("optim: a large parameter (threaded chunks) updates like a small one") {
  const int64_t reps = 50000;  // 300000 elements, several parallel chunks
  std::vector<float> p0, g0;
  Vec g1 = grad_at(1);
  for (int64_t r = 0; r < reps; ++r)
    for (size_t i = 0; i < kP0.size(); ++i) {
      p0.push_back(float(kP0[i]));
      g0.push_back(float(g1[i]));
    }
  Tensor big = from_vector(p0, {reps, 6});
  optim::Adam opt({big}, {.lr = 0.05, .weight_decay = 0.1, .amsgrad = true});
  big.set_grad(from_vector(g0, {reps, 6}));
  opt.step();
  Tensor small = param_from(kP0);
  optim::Adam ref({small}, {.lr = 0.05, .weight_decay = 0.1, .amsgrad = true});
  set_grad_at(small, 1);
  ref.step();
  auto got = big.to_vector<float>(), want = small.to_vector<float>();
  bool same = true;
  for (size_t i = 0; i < got.size(); ++i) same = same && got[i] == want[i % 6];
  CHECK(same);
  CHECK(optim::clip_grad_norm_({big}, 1e9) == doctest::Approx(std::sqrt(double(reps)) * [&] {
          double s = 0;
          for (double v : g1) s += double(float(v)) * double(float(v));
          return std::sqrt(s);
        }()));
}
