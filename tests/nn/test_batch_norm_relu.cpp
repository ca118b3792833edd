// batch_norm_relu (batch norm with the ReLU folded into both passes) against relu(batch_norm(...)):
// the same values, gradients and running statistics exactly, in every dtype and both memory formats,
// training and eval; a gradcheck in f64; BatchNorm2d::forward_relu and ResNet's blocks with the
// fused_bn_relu switch off and on.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "nn/functional.h"
#include "nn/layers.h"
#include "nn/models/models.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
namespace F = mdl::nn::functional;

namespace {

using V = std::vector<Tensor>;

// One run of batch norm + ReLU: the output, the gradients of x (and of weight and bias when given),
// and the running statistics after it.
V run(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0, bool training, MemoryFormat format) {
  Tensor x = x0.contiguous(format).detach().requires_grad_(true);
  Tensor w = w0.defined() ? w0.detach().requires_grad_(true) : Tensor();
  Tensor b = b0.defined() ? b0.detach().requires_grad_(true) : Tensor();
  const int64_t C = x0.size(1);
  Tensor rm = full({C}, 0.25, kF32), rv = full({C}, 1.5, kF32);
  Tensor y = fused ? F::batch_norm_relu(x, rm, rv, w, b, training, 0.1, 1e-5)
                   : relu(F::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5));
  Generator g(17);
  const Tensor gy = randn(y.shape(), TensorOptions(kF64), &g).to(y.dtype());
  y.backward(gy);
  V r{y.detach(), x.grad()};
  if (w.defined()) r.push_back(w.grad());
  if (b.defined()) r.push_back(b.grad());
  r.push_back(rm);
  r.push_back(rv);
  return r;
}

const char* const kNames[] = {"output", "grad x", "grad weight", "grad bias", "running_mean", "running_var"};

}  // namespace

TEST_CASE("batch_norm_relu: equals relu(batch_norm) exactly, forward and backward, every dtype and format") {
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (const Shape& s : {Shape{4, 6, 5, 7}, Shape{3, 16, 8, 8}, Shape{33, 5}})
      for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
        if (format == MemoryFormat::ChannelsLast && s.size() != 4) continue;
        const int64_t C = s[1];
        Generator g(3);
        // Shifted so that a channel's values are not all on one side of zero after normalising.
        const Tensor x = (randn(s, TensorOptions(kF64), &g) * 2.0 + 0.3).to(t);
        const Tensor w = (randn({C}, TensorOptions(kF64), &g)).to(t), b = (randn({C}, TensorOptions(kF64), &g)).to(t);
        for (bool training : {true, false})
          for (bool affine : {true, false}) {
            const Tensor wa = affine ? w : Tensor(), ba = affine ? b : Tensor();
            const V fused = run(true, x, wa, ba, training, format), plain = run(false, x, wa, ba, training, format);
            REQUIRE(fused.size() == plain.size());
            const std::string what = std::string(dtype_name(t)) + (training ? " training" : " eval") +
                                     (affine ? " affine" : "") +
                                     (format == MemoryFormat::ChannelsLast ? " channels-last" : "");
            for (size_t i = 0; i < fused.size(); ++i) {
              const size_t name = affine || i < 2 ? i : i + 2;
              check_close(fused[i], plain[i], kExact, what + " " + kNames[name]);
            }
            const Tensor y = fused[0];
            CHECK_MESSAGE(y.dtype() == t, what);
            CHECK_MESSAGE(y.memory_format() == format, what);
            CHECK_MESSAGE(min(y.to(kF64)).item<double>() >= 0.0, what);
          }
      }
}

TEST_CASE("batch_norm_relu: a NaN input stays NaN and passes its gradient, as relu's does") {
  Tensor x = from_vector<float>({1, -2, NAN, 4, 0.5f, -1}, {3, 2}).requires_grad_(true);
  Tensor y = F::batch_norm_relu(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  Tensor x2 = x.detach().requires_grad_(true);
  Tensor y2 = relu(F::batch_norm(x2, Tensor(), Tensor(), Tensor(), Tensor(), true));
  check_close(y, y2, kExact, "output");
  y.backward(ones_like(y));
  y2.backward(ones_like(y2));
  check_close(x.grad(), x2.grad(), kExact, "grad x");
}

TEST_CASE("batch_norm_relu: bad input names the op") {
  CHECK_THROWS_WITH_AS(F::batch_norm_relu(ones({2}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm_relu: expected an input of shape (N, C)"), Error);
  CHECK_THROWS_WITH_AS(F::batch_norm_relu(ones({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm_relu: expected more than 1 value per channel"), Error);
}

TEST_CASE("batch_norm_relu: BatchNorm2d::forward_relu and ResNet blocks give the same bits with fused_bn_relu off "
          "and on") {
  auto bits = [&](bool on, const std::shared_ptr<nn::Module>& m, const Tensor& x0) {
    toggles::Scoped fuse(toggles::Toggle::fused_bn_relu, on);
    Tensor x = x0.detach().requires_grad_(true);
    auto* bn = dynamic_cast<nn::BatchNorm2d*>(m.get());
    Tensor y = bn ? bn->forward_relu(x) : (*m)(x);
    y.backward(sin(y * 3.0 + 0.5));
    V r{y.detach(), x.grad()};
    for (Tensor p : m->parameters()) {
      r.push_back(p.grad());
      p.zero_grad();
    }
    for (const auto& [name, buf] : m->named_buffers()) r.push_back(buf.clone());
    return r;
  };
  Generator g(5);
  const Tensor x = randn({2, 8, 6, 6}, TensorOptions(kF32), &g);
  const std::vector<std::shared_ptr<nn::Module>> modules{std::make_shared<nn::BatchNorm2d>(8),
                                                         std::make_shared<nn::models::BasicBlock>(8, 8, 1),
                                                         std::make_shared<nn::models::Bottleneck>(8, 2, 2)};
  for (const auto& m : modules) {
    // Each side from the same state: a copy of the module's starting parameters and buffers.
    NamedTensors start = m->state_dict();
    for (auto& [name, value] : start) value = value.clone();
    const V off = bits(false, m, x);
    m->load_state_dict(start);
    const V on = bits(true, m, x);
    REQUIRE(off.size() == on.size());
    for (size_t i = 0; i < off.size(); ++i)
      check_close(on[i], off[i], kExact, m->type_name() + " result " + std::to_string(i));
  }
}

// batch_norm_relu in f64, training and eval, with and without affine; the inputs keep clear of the
// ReLU's kink at the scale of gradcheck's step.
const test::GradcheckCases kBatchNormReluGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(8);
  V in{leaf_of(uniform({3, 4, 5}, g)), leaf_of(uniform({4}, g, 0.5, 1.5)), leaf_of(uniform({4}, g))};
  t.push_back({"batch_norm_relu", "training, affine", in, [](const V& v) {
                 Tensor rm = zeros({4}, kF64), rv = ones({4}, kF64);
                 return F::batch_norm_relu(v[0], rm, rv, v[1], v[2], true);
               }});
  t.push_back({"batch_norm_relu", "eval with running statistics, affine", in, [](const V& v) {
                 Tensor rm = full({4}, 0.3, kF64), rv = full({4}, 1.7, kF64);
                 return F::batch_norm_relu(v[0], rm, rv, v[1], v[2], false);
               }});
  V in2{leaf_of(uniform({6, 3}, g))};
  t.push_back({"batch_norm_relu", "training, (N, C), no affine", in2,
               [](const V& v) { return F::batch_norm_relu(v[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }});
});
