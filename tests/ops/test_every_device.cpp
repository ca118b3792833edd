// Every op written once and run on every device present: each case runs forward and backward in
// f32 on the device and in f64 on the CPU, and the two must agree (indices and booleans exactly).
// Run under a profiler session, the cases between them must call every kernel of the kernel table
// (kernels/all.h), so a new kernel, or a new backend, arrives with its tests. The family test files
// check each op against a plain reference; this file checks that every device and precision
// computes the same thing (the f32 vector paths against the f64 scalar ones, CUDA against the CPU).
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kernels/all.h"
#include "mdl.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

using Tensors = std::vector<Tensor>;

struct OpCase {
  const char* name;
  std::function<Tensors(Generator&)> inputs;   // on the CPU: f64 for floating inputs, integral as they are
  std::function<Tensors(const Tensors&)> run;  // outputs; floating ones are compared and backpropagated
  bool backward = true;                        // false: the case updates state (optimizer steps)
  double rtol = 1e-4;
};

Tensor U(Generator& g, const Shape& s, double lo = -1, double hi = 1) { return uniform(s, g, lo, hi); }
Tensor ints(Generator& g, int64_t hi, const Shape& s) { return randint(0, hi, s, kI64, &g); }

// A parameter p = in[0] with gradient in[1], after step(p).
template <class Step>
Tensors step_case(const Tensors& in, Step step) {
  NoGradGuard no_grad;
  Tensor p = in[0].clone();
  p.requires_grad_();
  p.set_grad(in[1].clone());
  step(p);
  return {p.detach()};
}

std::vector<OpCase> op_cases() {
  std::vector<OpCase> c;
  auto unary = [&](const char* name, Tensor (*f)(const Tensor&), double lo = -2, double hi = 2) {
    c.push_back({name,
                 [=](Generator& g) {
                   return Tensors{U(g, {3, 5}, lo, hi)};
                 },
                 [f](const Tensors& x) { return Tensors{f(x[0])}; }});
  };
  auto binary = [&](const char* name, Tensor (*f)(const Tensor&, const Tensor&), double lo = -2, double hi = 2) {
    c.push_back({name,
                 [=](Generator& g) {
                   return Tensors{U(g, {3, 4}, lo, hi), U(g, {4}, lo, hi)};
                 },
                 [f](const Tensors& x) { return Tensors{f(x[0], x[1])}; }});
  };
  // elementwise
  binary("add, broadcast", add);
  binary("sub, broadcast", sub);
  binary("mul, broadcast", mul);
  binary("div, broadcast", div, 0.5, 2);
  binary(
      "pow, broadcast", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.5, 2);
  binary("maximum", maximum);
  binary("minimum", minimum);
  binary("lt (bool)", lt);
  unary("neg", neg);
  unary("abs", abs);
  unary("exp", exp);
  unary("log", log, 0.5, 3);
  unary("sqrt", sqrt, 0.5, 3);
  unary("rsqrt", rsqrt, 0.5, 3);
  unary("sin", sin);
  unary("cos", cos);
  unary("tanh", tanh);
  unary("sigmoid", sigmoid);
  unary("relu", relu);
  unary("gelu", [](const Tensor& x) { return gelu(x); });
  unary("gelu tanh", [](const Tensor& x) { return gelu(x, "tanh"); });
  unary("silu", silu);
  unary("square", square);
  unary("clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); });
  unary("where", [](const Tensor& x) { return where(gt(x, zeros_like(x)), x, x * 3.0); });
  unary("masked_fill", [](const Tensor& x) { return masked_fill(x, lt(x, zeros_like(x)), 0.25); });
  // reductions and softmax
  auto rows = [](Generator& g) { return Tensors{U(g, {4, 6})}; };
  c.push_back({"sum over a dim", rows, [](const Tensors& x) { return Tensors{sum(x[0], {1})}; }});
  c.push_back({"mean over all", rows, [](const Tensors& x) { return Tensors{mean(x[0])}; }});
  c.push_back({"max over all", rows, [](const Tensors& x) { return Tensors{max(x[0])}; }});
  c.push_back({"max over a dim, with indices", rows, [](const Tensors& x) {
                 auto [v, i] = max(x[0], 1);
                 return Tensors{v, i};
               }});
  c.push_back({"argmin", rows, [](const Tensors& x) { return Tensors{argmin(x[0], 0)}; }});
  c.push_back({"var", rows, [](const Tensors& x) { return Tensors{var(x[0], {0})}; }});
  c.push_back({"std", rows, [](const Tensors& x) { return Tensors{mdl::std(x[0], {1})}; }});
  c.push_back({"softmax", rows, [](const Tensors& x) { return Tensors{softmax(x[0], 1)}; }});
  c.push_back({"log_softmax", rows, [](const Tensors& x) { return Tensors{log_softmax(x[0], 0)}; }});
  // views, copies, joining
  c.push_back({"transpose then contiguous", rows, [](const Tensors& x) { return Tensors{x[0].t().contiguous()}; }});
  c.push_back({"cat",
               [](Generator& g) {
                 return Tensors{U(g, {2, 3}), U(g, {4, 3})};
               },
               [](const Tensors& x) {
                 return Tensors{cat({x[0], x[1]}, 0)};
               }});
  c.push_back({"tril", rows, [](const Tensors& x) { return Tensors{tril(x[0], 1)}; }});
  // indexing and matmul
  c.push_back({"index_select",
               [](Generator& g) {
                 return Tensors{U(g, {5, 3}), ints(g, 5, {7})};
               },
               [](const Tensors& x) { return Tensors{index_select(x[0], 0, x[1])}; }});
  c.push_back({"gather",
               [](Generator& g) {
                 return Tensors{U(g, {4, 5}), ints(g, 5, {4, 3})};
               },
               [](const Tensors& x) { return Tensors{gather(x[0], 1, x[1])}; }});
  c.push_back({"scatter_add",
               [](Generator& g) {
                 return Tensors{U(g, {4, 5}), ints(g, 5, {4, 3}), U(g, {4, 3})};
               },
               [](const Tensors& x) { return Tensors{scatter_add(x[0], 1, x[1], x[2])}; }});
  c.push_back({"embedding",
               [](Generator& g) {
                 return Tensors{ints(g, 6, {2, 5}), U(g, {6, 4})};
               },
               [](const Tensors& x) { return Tensors{F::embedding(x[0], x[1])}; }});
  c.push_back({"matmul, batched",
               [](Generator& g) {
                 return Tensors{U(g, {2, 3, 5}), U(g, {2, 5, 4})};
               },
               [](const Tensors& x) { return Tensors{matmul(x[0], x[1])}; }});
  // nn
  auto linear_in = [](Generator& g) { return Tensors{U(g, {6, 8}), U(g, {5, 8}), U(g, {5})}; };
  c.push_back({"linear", linear_in, [](const Tensors& x) { return Tensors{F::linear(x[0], x[1], x[2])}; }});
  c.push_back({"linear + relu, fused", linear_in,
               [](const Tensors& x) { return Tensors{F::linear(x[0], x[1], x[2], Activation::Relu)}; }});
  c.push_back({"linear + gelu tanh, fused", linear_in,
               [](const Tensors& x) { return Tensors{F::linear(x[0], x[1], x[2], Activation::GeluTanh)}; }});
  c.push_back({"conv2d 3x3, padding 1",
               [](Generator& g) {
                 return Tensors{U(g, {2, 3, 6, 6}), U(g, {4, 3, 3, 3}), U(g, {4})};
               },
               [](const Tensors& x) {
                 return Tensors{F::conv2d(x[0], x[1], x[2], {1, 1}, {1, 1})};
               }});
  c.push_back({"conv2d depthwise, stride 2",
               [](Generator& g) {
                 return Tensors{U(g, {2, 4, 7, 7}), U(g, {4, 1, 3, 3}), U(g, {4})};
               },
               [](const Tensors& x) {
                 return Tensors{F::conv2d(x[0], x[1], x[2], {2, 2}, {1, 1}, {1, 1}, 4)};
               }});
  auto image = [](Generator& g) { return Tensors{U(g, {2, 3, 6, 6})}; };
  c.push_back({"max_pool2d 2x2", image, [](const Tensors& x) { return Tensors{F::max_pool2d(x[0], {2, 2})}; }});
  c.push_back({"max_pool2d_relu 2x2", image, [](const Tensors& x) {
                 return Tensors{F::max_pool2d_relu(x[0], {2, 2})};
               }});
  c.push_back({"avg_pool2d 3x3, stride 2, padding 1", image, [](const Tensors& x) {
                 return Tensors{F::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1})};
               }});
  c.push_back({"adaptive_avg_pool2d to 4x4", image, [](const Tensors& x) {
                 return Tensors{F::adaptive_avg_pool2d(x[0], {4, 4})};
               }});
  c.push_back(
      {"batch_norm, training",
       [](Generator& g) {
         return Tensors{U(g, {4, 3, 2, 2}), U(g, {3}), U(g, {3})};
       },
       [](const Tensors& x) {
         const Tensor rm = zeros({3}, {x[0].dtype(), x[0].device()}), rv = ones({3}, {x[0].dtype(), x[0].device()});
         return Tensors{F::batch_norm(x[0], rm, rv, x[1], x[2], true)};
       }});
  c.push_back({"layer_norm",
               [](Generator& g) {
                 return Tensors{U(g, {3, 8}), U(g, {8}), U(g, {8})};
               },
               [](const Tensors& x) { return Tensors{F::layer_norm(x[0], {8}, x[1], x[2])}; }});
  c.push_back({"group_norm",
               [](Generator& g) {
                 return Tensors{U(g, {2, 4, 3, 3}), U(g, {4}), U(g, {4})};
               },
               [](const Tensors& x) { return Tensors{F::group_norm(x[0], 2, x[1], x[2])}; }});
  c.push_back({"dropout",
               [](Generator& g) {
                 return Tensors{U(g, {4, 16})};
               },
               [](const Tensors& x) {
                 Generator gen(11);
                 return Tensors{F::dropout(x[0], 0.3, true, &gen)};
               }});
  c.push_back({"cross_entropy, label smoothing",
               [](Generator& g) {
                 return Tensors{U(g, {6, 5}), ints(g, 5, {6})};
               },
               [](const Tensors& x) { return Tensors{F::cross_entropy(x[0], x[1], {.label_smoothing = 0.1})}; }});
  c.push_back({"add_relu, broadcast",
               [](Generator& g) {
                 return Tensors{U(g, {4, 5}), U(g, {5})};
               },
               [](const Tensors& x) { return Tensors{add_relu(x[0], x[1])}; }});
  c.push_back(
      {"scaled_dot_product_attention, causal",
       [](Generator& g) {
         return Tensors{U(g, {2, 2, 5, 4}), U(g, {2, 2, 5, 4}), U(g, {2, 2, 5, 4})};
       },
       [](const Tensors& x) { return Tensors{F::scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), true)}; }});
  // optimizer steps and loss scaling (state, no backward)
  auto param = [](Generator& g) { return Tensors{U(g, {10}), U(g, {10})}; };
  c.push_back({"AdamW step", param,
               [](const Tensors& x) {
                 return step_case(x, [](Tensor& p) {
                   optim::AdamW opt(std::vector<Tensor>{p}, {.lr = 0.01});
                   opt.step();
                   opt.step();
                 });
               },
               false});
  c.push_back({"SGD step, momentum", param,
               [](const Tensors& x) {
                 return step_case(x, [](Tensor& p) {
                   optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .momentum = 0.9});
                   opt.step();
                   opt.step();
                 });
               },
               false});
  // Three parameters of one group: the multi-tensor kernels (one launch for all of them on a GPU).
  auto params3 = [](Generator& g) {
    return Tensors{U(g, {10}), U(g, {3, 4}), U(g, {5}), U(g, {10}), U(g, {3, 4}), U(g, {5})};
  };
  // The three parameters of params3's values, each with its gradient.
  auto with_grads3 = [](const Tensors& x) {
    std::vector<Tensor> ps;
    for (size_t i = 0; i < 3; ++i) {
      Tensor p = x[i].clone();
      p.requires_grad_();
      p.set_grad(x[i + 3].clone());
      ps.push_back(p);
    }
    return ps;
  };
  auto step3 = [=](const Tensors& x, auto make_opt) {
    NoGradGuard no_grad;
    std::vector<Tensor> ps = with_grads3(x);
    auto opt = make_opt(ps);
    opt.step();
    opt.step();
    return Tensors{ps[0].detach(), ps[1].detach(), ps[2].detach()};
  };
  c.push_back({"AdamW step, amsgrad, three parameters at once", params3,
               [=](const Tensors& x) {
                 return step3(
                     x, [](const std::vector<Tensor>& ps) { return optim::AdamW(ps, {.lr = 0.01, .amsgrad = true}); });
               },
               false});
  c.push_back({"SGD step, nesterov, three parameters at once", params3,
               [=](const Tensors& x) {
                 return step3(x, [](const std::vector<Tensor>& ps) {
                   return optim::SGD(ps, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
                 });
               },
               false});
  c.push_back({"clip_grad_norm_", param,
               [](const Tensors& x) {
                 NoGradGuard no_grad;
                 Tensor p = x[0].clone();
                 p.requires_grad_();
                 p.set_grad(x[1].clone());
                 optim::clip_grad_norm_({p}, 0.5);
                 return Tensors{p.grad()};
               },
               false});
  c.push_back({"GradScaler unscale_ of three gradients, one kernel call each (multi_tensor_step off)", params3,
               [=](const Tensors& x) {
                 NoGradGuard no_grad;
                 std::vector<Tensor> ps = with_grads3(x);
                 optim::SGD opt(ps, {.lr = 1.0});
                 amp::GradScaler scaler({.init_scale = 1024.0});
                 toggles::set_multi_tensor_step(false);
                 scaler.unscale_(opt);
                 toggles::set_multi_tensor_step(true);
                 return Tensors{ps[0].grad(), ps[1].grad(), ps[2].grad()};
               },
               false});
  c.push_back({"GradScaler unscale_, step and update", param,
               [](const Tensors& x) {
                 NoGradGuard no_grad;
                 Tensor p = x[0].clone();
                 p.requires_grad_();
                 p.set_grad(x[1].clone());
                 optim::SGD opt(std::vector<Tensor>{p}, {.lr = 1.0});
                 amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 1});
                 scaler.unscale_(opt);
                 const Tensor unscaled = p.grad().clone();
                 scaler.step(opt);
                 scaler.update();  // a clean step: the scale doubles
                 return Tensors{unscaled, p.detach().clone(), scaler.scale_tensor().clone()};
               },
               false});
  return c;
}

struct Result {
  std::vector<std::vector<double>> outputs, grads;
  std::vector<bool> exact;  // per output: compared exactly (indices, booleans)
};

// Runs one case with floating inputs in `dtype` on `device`; seed fixes the inputs and the weights
// that turn the outputs into one scalar for the backward.
Result run_case(const OpCase& op, Device device, DType dtype, uint64_t seed) {
  Generator g(seed);
  Tensors leaves;
  for (const Tensor& x : op.inputs(g)) {
    Tensor t = x.is_floating_point() ? x.to(dtype).to(device) : x.to(device);
    if (op.backward && t.is_floating_point()) t = leaf_of(t);
    leaves.push_back(t);
  }
  const Tensors outs = op.run(leaves);
  Result r;
  Tensor loss;
  for (const Tensor& y : outs) {
    r.outputs.push_back(values(y));
    r.exact.push_back(!y.is_floating_point());
    if (!op.backward || !y.is_floating_point()) continue;
    const Tensor w = uniform(y.shape(), g, 0.5, 1.5).to(dtype).to(device);
    const Tensor term = sum(y * w);
    loss = loss.defined() ? loss + term : term;
  }
  if (loss.defined()) {
    loss.backward();
    for (const Tensor& x : leaves)
      if (x.is_floating_point()) r.grads.push_back(x.grad().defined() ? values(x.grad()) : std::vector<double>{});
  }
  return r;
}

// f32 results agree with f64 ones within rtol, relative to each tensor's largest magnitude.
void check_agrees(const Result& got, const Result& want, double rtol, const std::string& what) {
  auto close = [&](const std::vector<double>& a, const std::vector<double>& b, bool exact, const std::string& which) {
    double scale = 0;
    for (double v : b) scale = std::max(scale, std::abs(v));
    check_close(a, b, exact ? kExact : Tol{rtol, rtol * scale}, what + ": " + which);
  };
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (size_t i = 0; i < got.outputs.size(); ++i)
    close(got.outputs[i], want.outputs[i], want.exact[i], "output " + std::to_string(i));
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i)
    close(got.grads[i], want.grads[i], false, "gradient " + std::to_string(i));
}

void run_every_case_on(Device device) {
  const std::vector<OpCase> cases = op_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const OpCase& op = cases[i];
    INFO(op.name, " on ", device);
    const uint64_t seed = 1000 + i;
    const Result want = run_case(op, Device::cpu(), kF64, seed);
    const Result got = run_case(op, device, kF32, seed);
    check_agrees(got, want, op.rtol, std::string(op.name) + " on " + device.str());
  }
}

}  // namespace

TEST_CASE("every op on the CPU: f32 forward and backward agree with f64") { run_every_case_on(Device::cpu()); }

TEST_CASE("cuda: every op in f32, forward and backward, agrees with the CPU's f64" * MDL_CUDA_ONLY) {
  run_every_case_on(Device::cuda());
}

TEST_CASE("every kernel of the kernel table is called by some op case") {
  std::set<std::string> called;
  {
    profiler::Session session;
    for (const OpCase& op : op_cases()) run_case(op, Device::cpu(), kF32, 7);
    session.stop();
    for (const profiler::Event& e : session.events())
      if (e.kind == profiler::EventKind::Kernel) called.insert(e.name);
  }
  for (const kernels::StubInfo& stub : kernels::table_stubs())
    CHECK_MESSAGE(called.count(stub.name), "no op case calls the kernel '", std::string(stub.name),
                  "': add one to tests/ops/test_every_device.cpp");
}
