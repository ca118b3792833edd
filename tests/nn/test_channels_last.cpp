// Channels-last tensors: the format's strides and tests, the ops that keep it (elementwise, conv,
// batch norm, pooling), each against the same op on (N, C, H, W) tensors, forward and backward, a
// gradcheck through each, whole models and optimizer steps with Module::to(ChannelsLast), and the
// same on a GPU (cuDNN's NHWC convolutions; skipped, and reported skipped, without one).
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;
namespace M = mdl::nn::models;

namespace {

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

// A channels-last leaf holding sample(shape)'s values.
Tensor cl_leaf(const Shape& s, DType t, uint64_t seed, Device d = Device::cpu()) {
  Tensor x = sample(s, t, seed).to(d).contiguous(kCL);
  x.requires_grad_();
  return x;
}
Tensor nchw_leaf(const Tensor& like) {
  Tensor x = like.detach().contiguous();
  x.requires_grad_();
  return x;
}

bool is_cl(const Tensor& t) { return t.memory_format() == kCL; }

struct ConvCase {
  Shape x, w;
  F::Pair stride, padding;
  int64_t groups;
  bool bias;
  const char* what;
};

const ConvCase kConvCases[] = {
    {{2, 8, 9, 11}, {6, 8, 3, 3}, {1, 1}, {1, 1}, 1, true, "3x3 stride 1 (direct loops)"},
    {{2, 5, 9, 10}, {7, 5, 3, 3}, {2, 2}, {1, 1}, 1, true, "3x3 stride 2 (im2col)"},
    {{3, 6, 7, 7}, {4, 6, 1, 1}, {1, 1}, {0, 0}, 1, false, "1x1, no bias"},
    {{2, 6, 8, 9}, {6, 1, 3, 3}, {1, 1}, {1, 1}, 6, true, "depthwise"},
    {{2, 6, 8, 8}, {4, 3, 3, 2}, {1, 2}, {1, 0}, 2, true, "two groups, 3x2 kernel"},
    {{2, 1, 10, 10}, {5, 1, 3, 3}, {1, 1}, {1, 1}, 1, true, "one input channel"},
};

// y and every gradient of conv2d from x and w (each in its own format), for a fixed output gradient.
struct ConvRun {
  Tensor y, gx, gw, gb;
};
ConvRun run_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  for (const Tensor* t : {&x, &w, &b})
    if (t->defined()) Tensor(*t).zero_grad();
  Tensor y = F::conv2d(x, w, b, c.stride, c.padding, {1, 1}, c.groups);
  y.backward(sample(y.shape(), y.dtype(), 99).to(y.device()));
  return {y, x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

}  // namespace

TEST_CASE("channels_last: strides, format tests and conversions") {
  CHECK(strides_for({2, 3, 4, 5}, kCL) == Shape{60, 1, 15, 3});
  CHECK(strides_for({2, 3, 4, 5}, MemoryFormat::Contiguous) == Shape{60, 20, 5, 1});
  const Tensor e = make_tensor({2, 3, 4, 5}, kF32, Device::cpu(), kCL);
  CHECK(e.strides() == Shape{60, 1, 15, 3});
  CHECK(e.is_contiguous(kCL));
  CHECK_FALSE(e.is_contiguous());
  CHECK(is_cl(e));

  const Tensor x = sample({2, 3, 4, 5}, kF32, 1);
  const Tensor y = x.contiguous(kCL);
  CHECK(is_cl(y));
  CHECK(values(y) == values(x));
  CHECK(y.contiguous(kCL).is_same(y));
  CHECK(x.contiguous(MemoryFormat::Contiguous).is_same(x));
  CHECK(y.contiguous().is_contiguous());
  CHECK(values(y.contiguous()) == values(x));
  // An (N, H, W, C) tensor seen as (N, C, H, W) is channels-last.
  CHECK(is_cl(sample({2, 4, 5, 3}, kF32, 2).permute({0, 3, 1, 2})));

  // One channel, or one pixel: dense in both formats; the strides of the size-1 dims say which.
  for (const Shape& s : {Shape{2, 1, 4, 5}, Shape{2, 3, 1, 1}}) {
    const Tensor t = make_tensor(s, kF32, Device::cpu(), kCL), u = make_tensor(s, kF32, Device::cpu());
    CHECK(t.is_contiguous(kCL));
    CHECK(t.is_contiguous());
    CHECK(is_cl(t));
    CHECK(u.is_contiguous(kCL));
    CHECK_FALSE(is_cl(u));
    CHECK(u.contiguous(kCL).is_same(u));  // already dense channels-last: no copy, as PyTorch
  }
  CHECK_FALSE(sample({2, 3, 4}, kF32, 3).is_contiguous(kCL));
  CHECK_THROWS_WITH_AS(make_tensor({2, 3}, kF32, Device::cpu(), kCL),
                       doctest::Contains("channels_last: expected a 4-D shape (N, C, H, W), got [2,3]"), Error);

  // Casts keep the format (autocast's f16 copies stay channels-last); the conversion is differentiable.
  CHECK(is_cl(y.to(kF16)));
  CHECK(is_cl(y.to(Device::cpu())));  // same device: the tensor itself
  CHECK(is_cl(y.to(Device::cpu())));  // same device: the tensor itself
  CHECK(is_cl(Tensor(y).to(kF64).to(Device::cpu())));
  CHECK(values(y.to(kF64)) == values(x.to(kF64)));
  Tensor leaf = nchw_leaf(x);
  sum(leaf.contiguous(kCL) * 2.0).backward();
  CHECK(values(leaf.grad()) == std::vector<double>(size_t(x.numel()), 2.0));
}

TEST_CASE("channels_last: elementwise ops keep the format and the values") {
  // Large enough to be split across threads.
  const Shape s{4, 16, 32, 33};
  const Tensor a = sample(s, kF32, 4), b = sample(s, kF32, 5), bias = sample({1, 16, 1, 1}, kF32, 6);
  const Tensor ac = a.contiguous(kCL), bc = b.contiguous(kCL);
  struct Case {
    Tensor got, want;
    bool keeps;
    const char* what;
  };
  const Case cases[] = {
      {ac + bc, a + b, true, "add"},
      {ac + b, a + b, true, "add, second operand contiguous"},
      {a * bc, a * b, true, "mul, first operand contiguous"},
      {ac * bias, a * bias, true, "mul by a broadcast channel vector"},
      {relu(ac), relu(a), true, "relu"},
      {sigmoid(ac), sigmoid(a), true, "sigmoid"},
      {ac.to(kBF16), a.to(kBF16), true, "cast to bf16"},
      {gt(ac, bc), gt(a, b), true, "comparison"},
      {sum(ac, {1}), sum(a, {1}), false, "sum over channels"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    if (c.keeps) CHECK(is_cl(c.got));
    check_close(c.got, c.want, kExact, c.what);
  }
  // A sum over every element adds in memory order: the same value, rounded differently.
  check_close(sum(ac), sum(a), dtype_tol(kF32), "sum of all");
  Tensor acc = ac.clone().contiguous(kCL);
  acc.add_(bc, 0.5);
  CHECK(is_cl(acc));
  check_close(acc, a + b * 0.5, kExact, "add_ in place");
}

TEST_CASE("channels_last: conv2d equals the contiguous conv, forward and backward, in f32 and f64") {
  for (DType dt : {kF32, kF64})
    for (const ConvCase& c : kConvCases)
      for (bool w_cl : {false, true}) {
        CAPTURE(c.what);
        CAPTURE(dtype_name(dt));
        CAPTURE(w_cl);
        Tensor w = sample(c.w, dt, 11).requires_grad_();
        Tensor b = c.bias ? sample({c.w[0]}, dt, 12).requires_grad_() : Tensor();
        Tensor x = nchw_leaf(sample(c.x, dt, 10));
        const ConvRun want = run_conv(c, x, w, b);
        const std::vector<double> want_gw = values(want.gw), want_gb = values(want.gb);

        Tensor xc = cl_leaf(c.x, dt, 10);
        Tensor wc = w_cl ? w.detach().contiguous(kCL).requires_grad_() : w;
        const ConvRun got = run_conv(c, xc, wc, b);
        // contiguous(ChannelsLast) leaves a one-channel tensor as it is (it is dense in both), as PyTorch.
        CHECK(is_cl(got.y) == (c.x[1] > 1 || (w_cl && c.w[1] > 1)));
        CHECK(got.gx.is_contiguous(kCL));
        CHECK(got.gw.is_contiguous(w_cl ? kCL : MemoryFormat::Contiguous));
        check_close(got.y, want.y, kExact, "output");
        check_close(got.gx, want.gx, kExact, "input gradient");
        check_close(got.gw, want_gw, kExact, "weight gradient");
        if (c.bias) check_close(got.gb, want_gb, kExact, "bias gradient");
      }
}

TEST_CASE("channels_last: batch norm, pooling and ReLU equal their contiguous forms") {
  const Shape s{3, 5, 6, 7};
  for (DType dt : {kF32, kF64}) {
    CAPTURE(dtype_name(dt));
    const Tol tol = dtype_tol(dt);
    for (bool training : {true, false}) {
      CAPTURE(training);
      Tensor x = nchw_leaf(sample(s, dt, 20)), xc = cl_leaf(s, dt, 20);
      Tensor w = sample({5}, kF32, 21).requires_grad_(), b = sample({5}, kF32, 22).requires_grad_();
      Tensor rm = sample({5}, kF32, 23), rv = abs(sample({5}, kF32, 24)) + 0.5;
      Tensor rm_c = rm.clone(), rv_c = rv.clone();
      Tensor y = F::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
      const Tensor gy = sample(s, dt, 25);
      y.backward(gy);
      const std::vector<double> gw = values(w.grad()), gb = values(b.grad());
      w.zero_grad();
      b.zero_grad();
      Tensor yc = F::batch_norm(xc, rm_c, rv_c, w, b, training, 0.1, 1e-5);
      yc.backward(gy.contiguous(kCL));
      CHECK(is_cl(yc));
      CHECK(xc.grad().is_contiguous(kCL));
      check_close(yc, y, tol, "batch_norm output");
      check_close(xc.grad(), x.grad(), tol, "batch_norm input gradient");
      check_close(w.grad(), gw, dtype_tol(kF32), "batch_norm weight gradient");
      check_close(b.grad(), gb, dtype_tol(kF32), "batch_norm bias gradient");
      check_close(rm_c, rm, dtype_tol(kF32), "running mean");
      check_close(rv_c, rv, dtype_tol(kF32), "running var");
    }
    using Pool = std::function<Tensor(const Tensor&)>;
    const std::pair<const char*, Pool> pools[] = {
        {"max_pool2d 2x2",
         [](const Tensor& t) {
           return F::max_pool2d(t, {2, 2});
         }},
        {"max_pool2d 3x3 stride 2 pad 1",
         [](const Tensor& t) {
           return F::max_pool2d(t, {3, 3}, {2, 2}, {1, 1});
         }},
        {"avg_pool2d 3x2",
         [](const Tensor& t) {
           return F::avg_pool2d(t, {3, 2}, {1, 2}, {1, 1}, false);
         }},
        {"adaptive_avg_pool2d 4x3",
         [](const Tensor& t) {
           return F::adaptive_avg_pool2d(t, {4, 3});
         }},
        // (N, C, 1, 1) is dense in both formats: its strides say which it is.
        {"adaptive_avg_pool2d 1x1",
         [](const Tensor& t) {
           return F::adaptive_avg_pool2d(t, {1, 1});
         }},
        {"relu", [](const Tensor& t) { return relu(t); }},
    };
    for (const auto& [what, pool] : pools) {
      CAPTURE(what);
      Tensor x = nchw_leaf(sample(s, dt, 30)), xc = cl_leaf(s, dt, 30);
      Tensor y = pool(x), yc = pool(xc);
      CHECK(is_cl(yc));
      const Tensor gy = sample(y.shape(), dt, 31);
      y.backward(gy);
      yc.backward(gy.contiguous(kCL));
      check_close(yc, y, kExact, "output");
      check_close(xc.grad(), x.grad(), kExact, "input gradient");
    }
  }
}

TEST_CASE("channels_last: gradcheck through conv2d, batch norm and pooling on channels-last inputs") {
  const auto cl = [](const Tensor& t) { return t.contiguous(kCL); };
  Tensor x = leaf_of(sample({2, 3, 5, 6}, kF64, 40)), w = leaf_of(sample({4, 3, 3, 3}, kF64, 41));
  Tensor b = leaf_of(sample({4}, kF64, 42)), g = leaf_of(sample({4}, kF64, 43)), h = leaf_of(sample({4}, kF64, 44));
  const auto r = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        Tensor y = F::conv2d(cl(in[0]), cl(in[1]), in[2], {1, 1}, {1, 1});
        y = F::batch_norm(y, Tensor(), Tensor(), in[3], in[4], true);
        return F::max_pool2d(relu(y), {2, 2}, {1, 1}) * F::avg_pool2d(y, {2, 2}, {1, 1});
      },
      {x, w, b, g, h});
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("channels_last: Module::to(ChannelsLast) trains as the contiguous model does") {
  // ResNet-18 (batch norm, residual adds, strided and 1x1 convs; its batch-norm sums run in another
  // order, so close in f64) with SGD, and SimpleCNN (one input channel: its first conv is
  // channels-last through its weight; the CPU computes the same sums, so bit for bit) with AdamW
  // and SGD, two steps each.
  struct ModelCase {
    const char* what;
    std::function<std::shared_ptr<nn::Module>()> make;
    Shape x;
    bool adam;
    Tol tol;
  };
  const auto resnet = [] { return std::static_pointer_cast<nn::Module>(M::resnet18(10, 3)); };
  const auto cnn = [] { return std::static_pointer_cast<nn::Module>(M::SimpleCNN(1, 10, 12)); };
  // Under a sanitizer, where ResNet-18's f64 convs take most of a minute, 2 images of 12x12: its four
  // stages still see planes larger than 1x1 (12, 6, 3, 2 against 16, 8, 4, 2).
  const Shape resnet_x = kSanitized ? Shape{2, 3, 12, 12} : Shape{4, 3, 16, 16};
  const ModelCase models[] = {
      {"resnet18, SGD", resnet, resnet_x, false, same_tol(1e-9)},
      {"SimpleCNN, AdamW", cnn, {3, 1, 12, 12}, true, kExact},
      {"SimpleCNN, SGD", cnn, {3, 1, 12, 12}, false, kExact},
  };
  for (const ModelCase& mc : models) {
    CAPTURE(mc.what);
    manual_seed(7);
    auto a = mc.make();
    manual_seed(7);
    auto b = mc.make();
    a->to(kF64);
    b->to(kF64);
    b->to(kCL);
    for (const auto& [name, p] : b->named_parameters())
      if (p.dim() == 4) CHECK_MESSAGE(is_cl(p), name);
    std::unique_ptr<optim::Optimizer> oa, ob;
    if (mc.adam) {
      oa = std::make_unique<optim::AdamW>(a->parameters(), optim::AdamWOptions{.lr = 1e-2});
      ob = std::make_unique<optim::AdamW>(b->parameters(), optim::AdamWOptions{.lr = 1e-2});
    } else {
      oa = std::make_unique<optim::SGD>(a->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
      ob = std::make_unique<optim::SGD>(b->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
    }
    const Tensor x = sample(mc.x, kF64, 50);
    for (int step = 0; step < 2; ++step) {
      CAPTURE(step);
      Tensor ya = (*a)(x), yb = (*b)(x);
      check_close(yb, ya, mc.tol, "logits");
      sum(square(ya)).backward();
      sum(square(yb)).backward();
      oa->step();
      ob->step();
      oa->zero_grad();
      ob->zero_grad();
    }
    const NamedTensors pa = a->named_parameters(), pb = b->named_parameters();
    for (size_t i = 0; i < pa.size(); ++i) check_close(pb[i].second, pa[i].second, mc.tol, pa[i].first);
    for (const auto& [name, p] : b->named_parameters())
      if (p.dim() == 4) CHECK_MESSAGE(is_cl(p), name);  // still channels-last after the steps
  }
}

TEST_CASE("channels_last: an optimizer's state follows a parameter laid out anew after its first step") {
  for (bool adam : {true, false}) {
    CAPTURE(adam);
    manual_seed(8);
    nn::Conv2d a(3, 4, 2);
    manual_seed(8);
    nn::Conv2d b(3, 4, 2);
    std::unique_ptr<optim::Optimizer> oa, ob;
    if (adam) {
      oa = std::make_unique<optim::Adam>(a.parameters(), optim::AdamOptions{.lr = 0.1, .amsgrad = true});
      ob = std::make_unique<optim::Adam>(b.parameters(), optim::AdamOptions{.lr = 0.1, .amsgrad = true});
    } else {
      oa = std::make_unique<optim::SGD>(a.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      ob = std::make_unique<optim::SGD>(b.parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    }
    for (int step = 0; step < 3; ++step) {
      if (step == 1) b.to(kCL);  // between steps: its state was made contiguous
      const Tensor x = sample({2, 3, 5, 5}, kF32, uint64_t(61 + step));
      sum(square(a(x))).backward();
      sum(square(b(x))).backward();
      oa->step();
      ob->step();
      oa->zero_grad();
      ob->zero_grad();
    }
    CHECK(is_cl(b.weight));
    check_close(b.weight, a.weight, dtype_tol(kF32), "weight");
    check_close(b.bias, a.bias, dtype_tol(kF32), "bias");
  }
}

TEST_CASE("cuda: channels-last conv2d (cuDNN NHWC), batch norm and pooling equal the contiguous ones" * MDL_CUDA_ONLY) {
  const bool conv_tf32_was = toggles::cudnn_allow_tf32();
  toggles::set_cudnn_allow_tf32(false);  // f32 convs held to f32's tolerance
  const Device d = Device::cuda();
  for (DType dt : {kF32, kF16, kBF16})
    for (const ConvCase& c : kConvCases) {
      CAPTURE(c.what);
      CAPTURE(dtype_name(dt));
      Tensor w = sample(c.w, dt, 11).to(d).requires_grad_();
      Tensor b = c.bias ? sample({c.w[0]}, dt, 12).to(d).requires_grad_() : Tensor();
      Tensor x = nchw_leaf(sample(c.x, dt, 10).to(d));
      const ConvRun want = run_conv(c, x, w, b);
      const std::vector<double> want_gb = values(want.gb);
      Tensor xc = cl_leaf(c.x, dt, 10, d);
      const ConvRun got = run_conv(c, xc, w, b);
      CHECK(is_cl(got.y) == (c.x[1] > 1));
      CHECK(got.gx.is_contiguous(kCL));
      const Tol tol = dtype_tol(dt);
      CHECK(max_rel_diff(got.y, want.y) < tol.rtol * 4);
      CHECK(max_rel_diff(got.gx, want.gx) < tol.rtol * 4);
      CHECK(max_rel_diff(got.gw, want.gw) < tol.rtol * 8);
      if (c.bias) check_close(got.gb, want_gb, same_tol(tol.rtol * 8), "bias gradient");
      // Against the CPU's f64 too, so a wrong layout on both GPU paths cannot pass.
      Tensor x64 = nchw_leaf(sample(c.x, kF64, 10)), w64 = sample(c.w, kF64, 11).requires_grad_();
      Tensor b64 = c.bias ? sample({c.w[0]}, kF64, 12).requires_grad_() : Tensor();
      const ConvRun ref = run_conv(c, x64, w64, b64);
      CHECK(max_rel_diff(got.y, ref.y) < tol.rtol * 8);
      CHECK(max_rel_diff(got.gx, ref.gx) < tol.rtol * 8);
    }
  for (DType dt : {kF32, kF16}) {
    CAPTURE(dtype_name(dt));
    const Shape s{4, 8, 10, 10};
    Tensor x = nchw_leaf(sample(s, dt, 70).to(d)), xc = cl_leaf(s, dt, 70, d);
    CHECK(is_cl(xc));
    CHECK(is_cl(xc.detach().cpu()));  // device moves keep the format
    const auto net = [](const Tensor& t) {
      Tensor y = F::batch_norm(t, Tensor(), Tensor(), Tensor(), Tensor(), true);
      return F::adaptive_avg_pool2d(F::max_pool2d(relu(y) + t, {2, 2}), {3, 3});
    };
    Tensor y = net(x), yc = net(xc);
    CHECK(is_cl(yc));
    const Tensor gy = sample(y.shape(), dt, 71).to(d);
    y.backward(gy);
    yc.backward(gy);
    CHECK(max_rel_diff(yc, y) < dtype_tol(dt).rtol * 4);
    CHECK(max_rel_diff(xc.grad(), x.grad()) < dtype_tol(dt).rtol * 8);
  }
  toggles::set_cudnn_allow_tf32(conv_tf32_was);
}
