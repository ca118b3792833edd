// The multi_tensor_step switch: an optimizer step that updates the parameters of one group, dtype
// and device together (one GPU launch for up to 24 of them) leaves every parameter, state buffer
// and step count bit for bit as one update per parameter does: SGD (momentum, nesterov, weight
// decay), Adam with AMSGrad and L2, AdamW; two groups with their own lr, mixed dtypes, a parameter
// without a gradient, channels-last parameters, and steps skipped by GradScaler's flag. The GPU
// case runs more parameters than one launch takes, and one larger than a block's chunk.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "mdl.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;

namespace {

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(std::vector<optim::ParamGroup>)>;

// Parameters of the given shapes (every fourth one f64, every fifth channels-last 4-D), split into
// two groups with their own lr, on device d.
std::vector<optim::ParamGroup> make_groups(const std::vector<Shape>& shapes, Device d) {
  std::vector<optim::ParamGroup> groups(2);
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = sample(shapes[i], i % 4 == 3 ? kF64 : kF32, uint64_t(100 + i)).to(d);
    if (shapes[i].size() == 4 && i % 5 == 0) p = p.contiguous(MemoryFormat::ChannelsLast);
    p.requires_grad_();
    groups[i % 2].params.push_back(p);
  }
  groups[1].lr = 0.05;
  return groups;
}

// Runs `steps` steps with the switch in position `on` (grads drawn per step; the fourth parameter
// in group order gets none; step 1 is skipped through an inf flag; group 0's lr halves after step 2)
// and returns every parameter and state buffer, and the step counts.
struct Run {
  std::vector<Tensor> tensors;
  std::vector<int64_t> counts;
};
Run run(const MakeOpt& make, bool on, const std::vector<Shape>& shapes, Device d, int steps = 4) {
  toggles::set_multi_tensor_step(on);
  auto opt = make(make_groups(shapes, d));
  std::vector<Tensor> params;
  for (const auto& g : opt->param_groups())
    for (const Tensor& p : g.params) params.push_back(p);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (i == 3) continue;
      params[i].set_grad(sample(params[i].shape(), params[i].dtype(), uint64_t(1000 * s + i)).to(d));
    }
    const float flag = s == 1 ? std::numeric_limits<float>::infinity() : 0.0f;
    opt->step_if_finite(full({}, flag, TensorOptions(kF32, d)));
    if (s == 2) opt->param_groups()[0].lr *= 0.5;  // the device's lr follows
  }
  toggles::set_multi_tensor_step(true);
  Run r;
  for (const Tensor& p : params) {
    r.tensors.push_back(p.detach().clone());
    const optim::ParamState* st = opt->state(p);
    r.counts.push_back(st ? st->steps() : -1);
    if (!st) continue;
    for (const Tensor* b : {&st->momentum_buffer, &st->exp_avg, &st->exp_avg_sq, &st->max_exp_avg_sq})
      if (b->defined()) r.tensors.push_back(b->clone());
  }
  return r;
}

void check_same(const Run& got, const Run& want) {
  CHECK(got.counts == want.counts);
  REQUIRE(got.tensors.size() == want.tensors.size());
  for (size_t i = 0; i < got.tensors.size(); ++i)
    check_close(got.tensors[i], want.tensors[i], kExact, std::to_string(i));
}

const std::pair<const char*, MakeOpt> kOptimizers[] = {
    {"SGD, momentum, weight decay",
     [](std::vector<optim::ParamGroup> g) {
       return std::make_unique<optim::SGD>(std::move(g),
                                           optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2});
     }},
    {"SGD, nesterov, dampening 0",
     [](std::vector<optim::ParamGroup> g) {
       return std::make_unique<optim::SGD>(std::move(g),
                                           optim::SGDOptions{.lr = 0.1, .momentum = 0.8, .nesterov = true});
     }},
    {"SGD, no momentum",
     [](std::vector<optim::ParamGroup> g) { return std::make_unique<optim::SGD>(std::move(g), optim::SGDOptions{}); }},
    {"Adam, AMSGrad, L2",
     [](std::vector<optim::ParamGroup> g) {
       return std::make_unique<optim::Adam>(std::move(g),
                                            optim::AdamOptions{.lr = 0.01, .weight_decay = 1e-2, .amsgrad = true});
     }},
    {"AdamW",
     [](std::vector<optim::ParamGroup> g) {
       return std::make_unique<optim::AdamW>(std::move(g), optim::AdamWOptions{.lr = 0.01});
     }},
};

}  // namespace

TEST_CASE("multi_tensor_step: the steps equal one update per parameter, bit for bit") {
  const std::vector<Shape> shapes{{4, 3, 2, 2}, {7}, {3, 5}, {6}, {2, 2, 3, 3}, {5, 3, 2, 2}, {1}, {9}, {4, 4}};
  for (const auto& [what, make] : kOptimizers) {
    CAPTURE(what);
    check_same(run(make, true, shapes, Device::cpu()), run(make, false, shapes, Device::cpu()));
  }
}

TEST_CASE("cuda: multi-tensor steps on the GPU equal one launch per parameter and the CPU" * MDL_CUDA_ONLY) {
  // 30 parameters (two launches of up to 24), one of 70,000 elements (several chunks of a block),
  // empty ones skipped.
  std::vector<Shape> shapes;
  for (int i = 0; i < 30; ++i) shapes.push_back(i == 7 ? Shape{70000} : i == 11 ? Shape{0} : Shape{int64_t(3 + i)});
  shapes[0] = {4, 3, 5, 5};
  shapes[10] = {6, 4, 3, 3};
  for (const auto& [what, make] : kOptimizers) {
    CAPTURE(what);
    const Run many = run(make, true, shapes, Device::cuda());
    check_same(many, run(make, false, shapes, Device::cuda()));
    const Run cpu = run(make, false, shapes, Device::cpu());
    REQUIRE(many.tensors.size() == cpu.tensors.size());
    CHECK(many.counts == cpu.counts);
    for (size_t i = 0; i < many.tensors.size(); ++i)
      check_close(many.tensors[i], cpu.tensors[i], dtype_tol(many.tensors[i].dtype()), std::to_string(i));
  }
}

TEST_CASE("multi_tensor_step: GradScaler unscales every gradient as one kernel call each does, and finds an inf") {
  for (bool with_inf : {false, true}) {
    CAPTURE(with_inf);
    std::vector<std::vector<double>> grads[2];
    double flags[2];
    for (bool on : {false, true}) {
      toggles::set_multi_tensor_step(on);
      std::vector<Tensor> ps;
      for (int i = 0; i < 5; ++i) {
        Tensor p = sample({int64_t(3 + i)}, i == 2 ? kF64 : kF32, uint64_t(i)).requires_grad_();
        Tensor g = sample(p.shape(), p.dtype(), uint64_t(10 + i)) * 1024.0;
        if (with_inf && i == 3) g = g / 0.0;
        p.set_grad(g);
        ps.push_back(p);
      }
      optim::SGD opt(ps, {.lr = 1.0});
      amp::GradScaler scaler({.init_scale = 1024.0});
      scaler.unscale_(opt);
      for (const Tensor& p : ps) grads[on].push_back(values(p.grad()));
      flags[on] = double(scaler.step(opt) ? 0 : 1);  // the StepResult says whether the step ran
      toggles::set_multi_tensor_step(true);
    }
    CHECK(flags[0] == flags[1]);
    CHECK(flags[1] == (with_inf ? 1.0 : 0.0));
    for (size_t i = 0; i < 5; ++i)
      if (!with_inf || i != 3) CHECK(grads[1][i] == grads[0][i]);
  }
}
