// batch_norm_add_relu (a residual block's end, relu(batch_norm(x) + residual), in batch norm's own
// pass) against the composed ops: the same bits in f32 and f64, within rounding in f16 and bf16
// (the sum rounded once, not twice), in both memory formats, training and eval; a gradcheck in f64;
// clear errors; BatchNorm2d::forward_add_relu and ResNet's blocks with fused_bn_add_relu off and on.
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

// One run of the block's end: the output, the gradients of x, the residual, weight and bias (when
// given), and the running statistics after it.
V run(bool fused, const Tensor& x0, const Tensor& r0, const Tensor& w0, const Tensor& b0, bool training,
      MemoryFormat format) {
  Tensor x = x0.contiguous(format).detach().requires_grad_(true),
         r = r0.contiguous(format).detach().requires_grad_(true);
  Tensor w = w0.defined() ? w0.detach().requires_grad_(true) : Tensor();
  Tensor b = b0.defined() ? b0.detach().requires_grad_(true) : Tensor();
  const int64_t C = x0.size(1);
  Tensor rm = full({C}, 0.25, kF32), rv = full({C}, 1.5, kF32);
  Tensor y = fused ? F::batch_norm_add_relu(x, r, rm, rv, w, b, training, 0.1, 1e-5)
                   : add_relu(F::batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5), r);
  Generator g(17);
  const Tensor gy = randn(y.shape(), TensorOptions(kF64), &g).to(y.dtype());
  y.backward(gy);
  V out{y.detach(), x.grad(), r.grad()};
  if (w.defined()) out.push_back(w.grad());
  if (b.defined()) out.push_back(b.grad());
  out.push_back(rm);
  out.push_back(rv);
  return out;
}

}  // namespace

TEST_CASE("batch_norm_add_relu: equals add_relu(batch_norm, residual), forward and backward, every dtype and format") {
  for (DType t : {kF32, kF64, kF16, kBF16})
    for (const Shape& s : {Shape{4, 6, 5, 7}, Shape{3, 16, 8, 8}, Shape{33, 5}})
      for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
        if (format == MemoryFormat::ChannelsLast && s.size() != 4) continue;
        const int64_t C = s[1];
        Generator g(3);
        const Tensor x = (randn(s, TensorOptions(kF64), &g) * 2.0 + 0.3).to(t);
        const Tensor r0 = randn(s, TensorOptions(kF64), &g);
        const Tensor w = randn({C}, TensorOptions(kF64), &g).to(t), b = randn({C}, TensorOptions(kF64), &g).to(t);
        for (bool training : {true, false})
          for (bool affine : {true, false}) {
            const Tensor wa = affine ? w : Tensor(), ba = affine ? b : Tensor();
            // A sum within rounding of zero may take either side of the ReLU in 16 bits, whose two
            // roundings differ: the residual is moved 0.25 up where the f64 sum is within 0.1 of zero.
            const Tensor v64 = F::batch_norm(x.to(kF64), full({C}, 0.25, kF64), full({C}, 1.5, kF64),
                                             affine ? w.to(kF64) : Tensor(), affine ? b.to(kF64) : Tensor(), training);
            const Tensor near = lt(abs(v64 + r0), full(s, 0.1, kF64)).to(kF64);
            const Tensor r = (r0 + near * 0.25).to(t);
            const V fused = run(true, x, r, wa, ba, training, format),
                    plain = run(false, x, r, wa, ba, training, format);
            REQUIRE(fused.size() == plain.size());
            const std::string what = std::string(dtype_name(t)) + " " + shape_str(s) +
                                     (training ? " training" : " eval") + (affine ? " affine" : "") +
                                     (format == MemoryFormat::ChannelsLast ? " channels-last" : "");
            // 16-bit: the fused sum is rounded once, the composed one twice, so outputs may differ by
            // an ulp and a value within an ulp of zero may take the other side of the ReLU's mask.
            const bool exact = t == kF32 || t == kF64;
            for (size_t i = 0; i < fused.size(); ++i) {
              const bool stat = i + 2 >= fused.size();  // the running statistics: the same in every dtype
              check_close(fused[i], plain[i], exact || stat ? kExact : dtype_tol(t),
                          what + " result " + std::to_string(i));
            }
            const Tensor y = fused[0];
            CHECK_MESSAGE(y.dtype() == t, what);
            CHECK_MESSAGE(y.memory_format() == format, what);
            CHECK_MESSAGE(min(y.to(kF64)).item<double>() >= 0.0, what);
          }
      }
}

TEST_CASE("batch_norm_add_relu: a residual in another layout is read as it lies") {
  Generator g(4);
  const Tensor x = randn({2, 8, 4, 4}, TensorOptions(kF32), &g), r = randn({2, 8, 4, 4}, TensorOptions(kF32), &g);
  const Tensor y = F::batch_norm_add_relu(x, r.contiguous(MemoryFormat::ChannelsLast), Tensor(), Tensor(), Tensor(),
                                          Tensor(), true);
  const Tensor ref = add_relu(F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true), r);
  check_close(y, ref, kExact, "NCHW input, channels-last residual");
}

TEST_CASE("batch_norm_add_relu: bad input names the op and what was wrong") {
  const Tensor x = ones({2, 3, 2, 2});
  CHECK_THROWS_WITH_AS(F::batch_norm_add_relu(x, ones({2, 3, 2, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm_add_relu: the residual must match the input (shape"), Error);
  CHECK_THROWS_WITH_AS(
      F::batch_norm_add_relu(x, ones({2, 3, 2, 2}, kF64), Tensor(), Tensor(), Tensor(), Tensor(), true),
      doctest::Contains("got shape [2,3,2,2], f64"), Error);
  CHECK_THROWS_WITH_AS(F::batch_norm_add_relu(x, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("batch_norm_add_relu: the residual is undefined"), Error);
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  CHECK_THROWS_WITH_AS(bn->forward_add_relu(x, Tensor()),
                       doctest::Contains("BatchNorm2d::forward_add_relu: the residual is undefined"), Error);
}

TEST_CASE("batch_norm_add_relu: BatchNorm2d::forward_add_relu and ResNet blocks give the same bits with "
          "fused_bn_add_relu off and on") {
  auto bits = [&](bool on, const std::shared_ptr<nn::Module>& m, const Tensor& x0, const Tensor& r0) {
    toggles::Scoped fuse(toggles::Toggle::fused_bn_add_relu, on);
    Tensor x = x0.detach().requires_grad_(true), r = r0.detach().requires_grad_(true);
    auto* bn = dynamic_cast<nn::BatchNorm2d*>(m.get());
    Tensor y = bn ? bn->forward_add_relu(x, r) : (*m)(x);
    y.backward(sin(y * 3.0 + 0.5));
    V out{y.detach(), x.grad()};
    if (bn) out.push_back(r.grad());
    for (Tensor p : m->parameters()) {
      out.push_back(p.grad());
      p.zero_grad();
    }
    for (const auto& [name, buf] : m->named_buffers()) out.push_back(buf.clone());
    return out;
  };
  Generator g(5);
  const Tensor x = randn({2, 8, 6, 6}, TensorOptions(kF32), &g), r = randn({2, 8, 6, 6}, TensorOptions(kF32), &g);
  // BasicBlock with and without a downsample, Bottleneck with one.
  const std::vector<std::shared_ptr<nn::Module>> modules{
      std::make_shared<nn::BatchNorm2d>(8), std::make_shared<nn::models::BasicBlock>(8, 8, 1),
      std::make_shared<nn::models::BasicBlock>(8, 16, 2), std::make_shared<nn::models::Bottleneck>(8, 2, 2)};
  for (const auto& m : modules) {
    NamedTensors start = m->state_dict();
    for (auto& [name, value] : start) value = value.clone();
    const V off = bits(false, m, x, r);
    m->load_state_dict(start);
    const V on = bits(true, m, x, r);
    REQUIRE(off.size() == on.size());
    for (size_t i = 0; i < off.size(); ++i)
      check_close(on[i], off[i], kExact, m->type_name() + " result " + std::to_string(i));
  }
  // A residual of another dtype takes the composed path, with its type promotion.
  auto bn = std::make_shared<nn::BatchNorm2d>(8);
  const Tensor y = bn->forward_add_relu(x, r.to(kF64));
  CHECK(y.dtype() == kF64);
}

// batch_norm_add_relu in f64, training and eval; the sums keep clear of the ReLU's kink at the scale
// of gradcheck's step.
const test::GradcheckCases kBatchNormAddReluGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator g(9);
  V in{leaf_of(uniform({3, 4, 5}, g)), leaf_of(uniform({3, 4, 5}, g)), leaf_of(uniform({4}, g, 0.5, 1.5)),
       leaf_of(uniform({4}, g))};
  t.push_back({"batch_norm_add_relu", "training, affine", in, [](const V& v) {
                 Tensor rm = zeros({4}, kF64), rv = ones({4}, kF64);
                 return F::batch_norm_add_relu(v[0], v[1], rm, rv, v[2], v[3], true);
               }});
  t.push_back({"batch_norm_add_relu", "eval with running statistics, affine", in, [](const V& v) {
                 Tensor rm = full({4}, 0.3, kF64), rv = full({4}, 1.7, kF64);
                 return F::batch_norm_add_relu(v[0], v[1], rm, rv, v[2], v[3], false);
               }});
});
