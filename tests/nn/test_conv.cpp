// conv2d and linear against double-precision reference loops over many configurations (every
// threading, chunking and tiling path, non-contiguous inputs, f16/bf16), the depthwise kernel
// against im2col, gradcheck of each backward, and every error message.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mdl.h"
#include "nn/functional.h"
#include "kernels/conv.h"
#include "cpu/conv.h"
#include "cpu/gemm.h"
#include "tests/support/gradcheck_cases.h"
#include "tests/support/conv_reference.h"
#include "tests/support/test_util.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;
using namespace mdl::test::conv;
namespace F = mdl::nn::functional;
using F::Pair;
using V = std::vector<double>;

namespace {


// Restores the depthwise switch on scope exit.
struct DepthwiseDirect {
  bool saved = toggles::depthwise_direct();
  explicit DepthwiseDirect(bool on) { toggles::set_depthwise_direct(on); }
  ~DepthwiseDirect() { toggles::set_depthwise_direct(saved); }
};

}  // namespace

TEST_CASE("conv2d: forward matches the 7-loop reference (f32, f64)") {
  Generator gen(7);
  for (const ConvCase& c : forward_cases())
    for (DType t : {kF32, kF64}) {
      INFO(describe(c), " ", t);
      ConvRun r = run_conv(c, t, gen);
      const int64_t Ho = out_size(c.H, c.kh, c.s[0], c.p[0], c.d[0]), Wo = out_size(c.W, c.kw, c.s[1], c.p[1], c.d[1]);
      CHECK(r.y.shape() == Shape{c.N, c.Cout, Ho, Wo});
      CHECK(r.y.dtype() == t);
      const V ref = ref_conv(c, values(r.x), values(r.w), c.bias ? values(r.b) : V{});
      CHECK(rel_err(values(r.y), ref) < (t == kF32 ? 2e-5 : 1e-12));
    }
}

TEST_CASE("conv2d: backward matches the reference loops (f32, f64)") {
  Generator gen(8);
  for (const ConvCase& c : forward_cases())
    for (DType t : {kF32, kF64}) {
      INFO(describe(c), " ", t);
      ConvRun r = run_conv(c, t, gen, true);
      Tensor gy = randn(r.y.shape(), t, &gen);
      sum(r.y * gy).backward();
      const RefGrads ref = ref_conv_backward(c, values(r.x), values(r.w), values(gy));
      const double tol = t == kF32 ? 2e-5 : 1e-12;
      CHECK(rel_err(values(view_of(r.xleaf.grad(), c.layout)), ref.gx) < tol);
      CHECK(rel_err(values(r.w.grad()), ref.gw) < tol);
      if (c.bias) CHECK(rel_err(values(r.b.grad()), ref.gb) < tol);
    }
}

TEST_CASE("conv2d: the depthwise direct kernel agrees with the im2col path") {
  Generator gen(9);
  for (const ConvCase& c : forward_cases()) {
    if (c.g != c.C) continue;
    INFO(describe(c));
    ConvRun direct, im2col;
    {
      DepthwiseDirect on(true);
      Generator g1(gen.next_u64());
      Generator g2 = g1;
      direct = run_conv(c, kF64, g1, true);
      Tensor gy = randn(direct.y.shape(), kF64, &g1);
      sum(direct.y * gy).backward();
      DepthwiseDirect off(false);
      im2col = run_conv(c, kF64, g2, true);
      Tensor gy2 = randn(im2col.y.shape(), kF64, &g2);
      sum(im2col.y * gy2).backward();
    }
    CHECK(rel_err(values(direct.y), values(im2col.y)) < 1e-13);
    CHECK(rel_err(values(direct.xleaf.grad()), values(im2col.xleaf.grad())) < 1e-13);
    CHECK(rel_err(values(direct.w.grad()), values(im2col.w.grad())) < 1e-13);
    if (c.bias) CHECK(rel_err(values(direct.b.grad()), values(im2col.b.grad())) < 1e-13);
  }
}

TEST_CASE("conv2d: one thread and all threads agree") {
  Generator gen(10);
  const int threads = get_num_threads();
  for (const ConvCase& c : forward_cases()) {
    INFO(describe(c));
    Generator g1(gen.next_u64());
    Generator g2 = g1;
    ConvRun many = run_conv(c, kF32, g1, true);
    sum(many.y * many.y).backward();
    set_num_threads(1);
    ConvRun one = run_conv(c, kF32, g2, true);
    sum(one.y * one.y).backward();
    set_num_threads(threads);
    CHECK(rel_err(values(many.y), values(one.y)) < 1e-5);
    CHECK(rel_err(values(many.w.grad()), values(one.w.grad())) < 1e-5);
    CHECK(rel_err(values(many.xleaf.grad()), values(one.xleaf.grad())) < 1e-5);
  }
}

TEST_CASE("conv2d: f16 and bf16 compute in f32 and round once") {
  Generator gen(11);
  const ConvCase cases[] = {{2, 4, 9, 9, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2, true, "channels_last"},
                            {2, 4, 8, 8, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4}};
  for (const ConvCase& c : cases)
    for (DType t : {kF16, kBF16}) {
      INFO(describe(c), " ", t);
      ConvRun r = run_conv(c, t, gen, true);
      CHECK(r.y.dtype() == t);
      const V ref = ref_conv(c, values(r.x), values(r.w), values(r.b));
      CHECK(rel_err(values(r.y), ref) < (t == kF16 ? 2e-3 : 1e-2));
      sum(r.y.to(kF32)).backward();
      CHECK(r.w.grad().dtype() == t);
      CHECK(r.xleaf.grad().dtype() == t);
      const RefGrads g = ref_conv_backward(c, values(r.x), values(r.w), V(size_t(r.y.numel()), 1.0));
      CHECK(rel_err(values(r.w.grad()), g.gw) < (t == kF16 ? 2e-3 : 1e-2));
      CHECK(rel_err(values(view_of(r.xleaf.grad(), c.layout)), g.gx) < (t == kF16 ? 2e-3 : 1e-2));
    }
}

// bf16 convs on each bf16 GEMM kernel the CPU runs (AMX, VDPBF16PS, and VDPBF16PS emulated in
// AVX-512F): the GEMMs multiply the bf16 operands exactly and sum in f32 in another order than the
// widened f32 path (the direct kernel or the f32 GEMM); the results differ by at most one bf16 rounding.
TEST_CASE("conv2d: bf16 on each bf16 GEMM kernel matches the widened f32 path within one bf16 rounding" *
          doctest::skip(!cpu::gemm_kernel_available(cpu::GemmKernel::avx512_bf16_emulated))) {
  const ConvCase cases[] = {{16, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}},  // batched chunks, threads split the batch
                            {1, 12, 40, 40, 20, 3, 3, {1, 1}, {1, 1}},   // one sample cut into pixel tiles
                            {5, 192, 5, 5, 192, 3, 3, {1, 1}, {1, 1}},   // over 1 MiB of weights: im2col, chunks
                            {3, 16, 9, 7, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, "channels_last"},  // odd rows
                            {2, 9, 10, 10, 11, 3, 3, {1, 1}, {1, 1}},  // odd channel counts: a pair half zero
                            {2, 4, 3, 40, 8, 3, 3, {1, 1}, {1, 1}},    // rows over one vector, unfolded
                            {3, 8, 9, 11, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, true, "channels_last"}};
  using cpu::GemmKernel;
  for (GemmKernel k : {GemmKernel::amx_bf16, GemmKernel::avx512_bf16, GemmKernel::avx512_bf16_emulated}) {
    if (!cpu::gemm_kernel_available(k)) continue;
    CAPTURE(cpu::gemm_kernel_name(k));
    for (const ConvCase& c : cases) {
      INFO(describe(c));
      auto run = [&](bool bf16_kernel) {
        std::optional<cpu::ScopedGemmKernel> forced;
        if (bf16_kernel) forced.emplace(k);
        toggles::Scoped amx(toggles::Toggle::amx_bf16, false), dot(toggles::Toggle::avx512_bf16_dot, false);
        CHECK(cpu::gemm_bf16_values_kernel() == (bf16_kernel ? k : cpu::gemm_f32_kernel()));
        Generator gen(21);
        ConvRun r = run_conv(c, kBF16, gen, true);
        r.y.backward(randn(r.y.shape(), kBF16, &gen));  // the same gradient for both: not one made from y
        return std::vector<V>{values(r.y), values(r.w.grad()), values(r.xleaf.grad())};
      };
      const std::vector<V> tiles = run(true), widened = run(false);
      for (size_t i = 0; i < tiles.size(); ++i) {
        // Relative to each value, and where sums cancel to near zero, to the output's scale (f32's
        // summation error in another order, about 1e-7 of the terms, then a bf16 rounding).
        double scale = 0, worst = 0;
        for (double v : widened[i]) scale = std::max(scale, std::abs(v));
        for (size_t j = 0; j < tiles[i].size(); ++j)
          worst = std::max(worst, std::abs(tiles[i][j] - widened[i][j]) / (std::abs(widened[i][j]) + 1e-3 * scale));
        INFO("output ", i, " (y, grad w, grad x): worst relative difference ", worst);
        CHECK(worst <= 0x1p-7);
      }
    }
  }
}

TEST_CASE("conv2d: unbatched input, empty batch, zero output channels") {
  Generator gen(12);
  Tensor x = randn({3, 6, 5}, kF64, &gen), w = randn({4, 3, 3, 3}, kF64, &gen), b = randn({4}, kF64, &gen);
  Tensor y = F::conv2d(x, w, b, {1, 1}, {1, 1});
  CHECK(y.shape() == Shape{4, 6, 5});
  CHECK(rel_err(values(y), values(F::conv2d(unsqueeze(x, 0), w, b, {1, 1}, {1, 1}))) == 0.0);

  Tensor w2 = randn({4, 3, 3, 3}, kF32, &gen), b2 = randn({4}, kF32, &gen);
  w2.requires_grad_();
  b2.requires_grad_();
  Tensor e = zeros({0, 3, 5, 5});
  Tensor ye = F::conv2d(e, w2, b2);
  CHECK(ye.shape() == Shape{0, 4, 3, 3});
  sum(ye).backward();
  CHECK(values(w2.grad()) == V(size_t(w2.numel()), 0.0));
  CHECK(values(b2.grad()) == V(4, 0.0));

  CHECK(F::conv2d(zeros({2, 3, 5, 5}), zeros({0, 3, 3, 3})).shape() == Shape{2, 0, 3, 3});
}

// conv2d w.r.t. input, weight and bias, through both depthwise paths.
const test::GradcheckCases kConv2dGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator gen(13);
  struct G {
    ConvCase c;
    bool x_grad;
    bool direct;
  };
  const G cases[] = {
      {{2, 2, 5, 6, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true, "channels_last"}, true, true},  // strided
      {{1, 2, 6, 6, 2, 3, 3, {1, 1}, {2, 2}, {2, 2}, 1, false}, true, true},                  // padded, dilated
      {{2, 4, 5, 5, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true, "strided"}, true, true},        // grouped
      {{2, 3, 5, 5, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3, true}, true, true},                   // depthwise, direct
      {{2, 3, 5, 5, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 3, true}, true, false},                  // depthwise, im2col
      {{1, 2, 4, 7, 3, 2, 3, {1, 2}, {1, 0}, {1, 2}, 1, true, "strided"}, true, true},        // non-square
      {{3, 2, 4, 4, 2, 1, 1}, false, true},                                                   // 1x1, x needs no grad
  };
  for (const G& k : cases) {
    const ConvCase& c = k.c;
    Tensor x = randn(leaf_shape({c.N, c.C, c.H, c.W}, c.layout), kF64, &gen);
    Tensor w = randn({c.Cout, c.C / c.g, c.kh, c.kw}, kF64, &gen), b = randn({c.Cout}, kF64, &gen);
    if (k.x_grad) x.requires_grad_();
    w.requires_grad_();
    b.requires_grad_();
    std::vector<Tensor> in{x, w};
    if (c.bias) in.push_back(b);
    const bool direct = k.direct;
    t.push_back(
        {"conv2d", describe(c) + (direct ? " direct" : " im2col"), in, [c, direct](const std::vector<Tensor>& v) {
           DepthwiseDirect dd(direct);
           return F::conv2d(view_of(v[0], c.layout), v[1], c.bias ? v[2] : Tensor(), c.s, c.p, c.d, c.g);
         }});
  }
});

TEST_CASE("conv2d: errors name the op, the shapes and the options") {
  const Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 3, 3, 3});
  auto throws = [](auto f, const char* msg) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(msg), mdl::Error); };
  throws(
      [&] {
        F::conv2d(zeros({3, 8}), w);
      },
      "conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape [3,8]");
  throws(
      [&] {
        F::conv2d(x, zeros({4, 3, 3}));
      },
      "conv2d: expected a 4-D weight (C_out, C_in/groups, kH, kW), got shape [4,3,3]");
  throws(
      [&] {
        F::conv2d(x, zeros({4, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2);
      },
      "conv2d: input [2,3,8,8] has 3 channels but weight [4,2,3,3] expects 4 (groups=2)");
  throws(
      [&] {
        F::conv2d(x, zeros({4, 4, 3, 3}));
      },
      "conv2d: input [2,3,8,8] has 3 channels but weight [4,4,3,3] expects 4 (groups=1)");
  throws(
      [&] {
        F::conv2d(x, zeros({5, 1, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3);
      },
      "conv2d: weight [5,1,3,3] has 5 output channels, which groups=3 does not divide");
  throws([&] { F::conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {1, 1}, 0); }, "conv2d: groups must be positive, got 0");
  throws([&] { F::conv2d(x, w, Tensor(), {0, 1}); }, "conv2d: stride must be positive, got [0,1]");
  throws([&] { F::conv2d(x, w, Tensor(), {1, -2}); }, "conv2d: stride must be positive, got [1,-2]");
  throws([&] { F::conv2d(x, w, Tensor(), {1, 1}, {-1, 0}); }, "conv2d: padding must be non-negative, got [-1,0]");
  throws([&] { F::conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {1, 0}); }, "conv2d: dilation must be positive, got [1,0]");
  throws(
      [&] {
        F::conv2d(zeros({2, 3, 4, 4}), zeros({4, 3, 5, 5}));
      },
      "conv2d: kernel 5x5 (5x5 dilated) is larger than the padded input 4x4 (input [2,3,4,4], padding [0,0])");
  throws(
      [&] {
        F::conv2d(zeros({2, 3, 4, 4}), zeros({4, 3, 3, 3}), Tensor(), {1, 1}, {0, 0}, {2, 2});
      },
      "conv2d: kernel 3x3 (5x5 dilated) is larger than the padded input 4x4 (input [2,3,4,4], padding [0,0])");
  throws([&] { F::conv2d(x, w, zeros({3})); }, "conv2d: bias of shape [3] should be [4]");
  throws(
      [&] {
        F::conv2d(x, zeros({4, 3, 3, 3}, kF64));
      },
      "conv2d: weight [4,3,3,3] is f64 but the input [2,3,8,8] is f32");
  throws(
      [&] {
        F::conv2d(zeros({2, 3, 8, 8}, kI64), zeros({4, 3, 3, 3}, kI64));
      },
      "conv2d: expected a floating input (f32, f16, bf16, f64), got i64 of shape [2,3,8,8]");
  throws(
      [&] {
        F::conv2d(x, zeros({4, 3, 0, 3}));
      },
      "conv2d: weight [4,3,0,3] has an empty input-channel or kernel dim");
}

// ---- linear ---------------------------------------------------------------------------------

TEST_CASE("linear: forward matches the reference for 1-D, 2-D, 3-D and transposed inputs") {
  Generator gen(20);
  struct L {
    Shape xs;
    bool transposed;
    bool bias;
    DType t;
  };
  const L cases[] = {{{5}, false, true, kF32},     {{4, 5}, false, true, kF32}, {{2, 3, 5}, false, true, kF64},
                     {{5, 4}, true, false, kF64},  {{0, 5}, false, true, kF32}, {{3, 5}, false, true, kF16},
                     {{64, 5}, false, true, kBF16}};
  for (const L& c : cases) {
    INFO("x ", shape_str(c.xs), c.transposed ? " transposed" : "", " ", c.t);
    Tensor xl = randn(c.xs, c.t, &gen);
    Tensor x = c.transposed ? transpose(xl, 0, 1) : xl;
    Tensor w = randn({3, 5}, c.t, &gen), b = c.bias ? randn({3}, c.t, &gen) : Tensor();
    Tensor y = F::linear(x, w, b);
    Shape os = x.shape();
    os.back() = 3;
    CHECK(y.shape() == os);
    const V xv = values(x), wv = values(w), bv = c.bias ? values(b) : V(3, 0.0);
    V ref;
    for (size_t m = 0; m < xv.size() / 5; ++m)
      for (size_t o = 0; o < 3; ++o) {
        double s = bv[o];
        for (size_t k = 0; k < 5; ++k) s += xv[m * 5 + k] * wv[o * 5 + k];
        ref.push_back(s);
      }
    const double tol = c.t == kF64 ? 1e-14 : c.t == kF32 ? 1e-6 : c.t == kF16 ? 2e-3 : 1e-2;
    CHECK(rel_err(values(y), ref) < tol);
  }
}

const test::GradcheckCases kLinearGradcheckCases([](std::vector<test::GradcheckCase>& t) {
  Generator gen(21);
  auto leaf = [&](const Shape& s) {
    Tensor t = randn(s, kF64, &gen);
    t.requires_grad_();
    return t;
  };
  using Vt = std::vector<Tensor>;
  // linear's own node: with a bias, the switch linear_bias_epilogue on records linear_act instead.
  const auto plain = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    toggles::Scoped bias_pass(toggles::Toggle::linear_bias_epilogue, false);
    return F::linear(x, w, b);
  };
  const test::GradcheckCase cases[] = {
      {"linear",
       "2-D with bias",
       {leaf({4, 5}), leaf({3, 5}), leaf({3})},
       [plain](const Vt& v) { return plain(v[0], v[1], v[2]); }},
      {"linear",
       "3-D with bias",
       {leaf({2, 3, 5}), leaf({4, 5}), leaf({4})},
       [plain](const Vt& v) { return plain(v[0], v[1], v[2]); }},
      {"linear", "1-D, no bias", {leaf({5}), leaf({3, 5})}, [](const Vt& v) { return F::linear(v[0], v[1]); }},
      {"linear",
       "transposed input and weight",
       {leaf({5, 4}), leaf({5, 3}), leaf({3})},
       [plain](const Vt& v) { return plain(transpose(v[0], 0, 1), transpose(v[1], 0, 1), v[2]); }},
  };
  t.insert(t.end(), std::begin(cases), std::end(cases));
});

TEST_CASE("linear: only the inputs that need a gradient get one") {
  Generator gen(22);
  auto leaf = [&](const Shape& s) { return randn(s, kF64, &gen).requires_grad_(); };
  Tensor x = randn({4, 5}, kF64, &gen), w = leaf({3, 5}), b = randn({3}, kF64, &gen);
  sum(F::linear(x, w, b)).backward();
  CHECK(w.grad().defined());
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("linear: errors name the op and the shapes") {
  auto throws = [](auto f, const char* msg) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(msg), mdl::Error); };
  throws(
      [] {
        F::linear(zeros({4, 3}), zeros({5, 4}));
      },
      "linear: input [4,3] has 3 features but weight [5,4] expects 4");
  throws(
      [] {
        F::linear(zeros({4, 3}), zeros({5, 3, 1}));
      },
      "linear: expected a 2-D weight (out, in), got shape [5,3,1]");
  throws([] { F::linear(zeros({}), zeros({5, 3})); }, "linear: expected an input of at least 1 dim, got shape []");
  throws([] { F::linear(zeros({4, 3}), zeros({5, 3}), zeros({4})); }, "linear: bias of shape [4] should be [5]");
  throws(
      [] {
        F::linear(zeros({4, 3}), zeros({5, 3}, kF64));
      },
      "linear: weight [5,3] is f64 but the input [4,3] is f32");
  throws(
      [] {
        F::linear(zeros({4, 3}), zeros({5, 3}), zeros({5}, kF16));
      },
      "linear: bias [5] is f16 but the input [4,3] is f32");
  throws(
      [] {
        F::linear(zeros({4, 3}, kI32), zeros({5, 3}, kI32));
      },
      "linear: expected a floating input (f32, f16, bf16, f64), got i32 of shape [4,3]");
}

TEST_CASE("conv2d: called from inside a caller's parallel region") {
  // Each thread of the caller's team runs its own convs (im2col and depthwise, forward and
  // backward); the kernels then stay on the calling thread with their own scratch.
  Generator gen(14);
  const ConvCase cs[] = {{4, 6, 9, 9, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
                         {4, 6, 9, 9, 6, 3, 3, {2, 2}, {1, 1}, {1, 1}, 6},
                         {4, 6, 9, 9, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}, 6}};
  for (const ConvCase& c : cs) {
    INFO(describe(c));
    Tensor x = randn({c.N, c.C, c.H, c.W}, kF32, &gen), w = randn({c.Cout, c.C / c.g, c.kh, c.kw}, kF32, &gen);
    Tensor y = F::conv2d(x, w, Tensor(), c.s, c.p, c.d, c.g);
    Tensor gy = randn(y.shape(), kF32, &gen);
    const kernels::Conv2dParams p{c.s[0], c.s[1], c.p[0], c.p[1], c.d[0], c.d[1], c.g};
    Tensor gx_ref = empty(x.shape()), gw_ref = empty(w.shape());
    kernels::conv2d_backward(Device::cpu(), gx_ref, gw_ref, Tensor(), gy, x, w, p);
    std::vector<Tensor> ys(4), gxs(4), gws(4);
    for (int i = 0; i < 4; ++i) {
      ys[size_t(i)] = empty(y.shape());
      gxs[size_t(i)] = empty(x.shape());
      gws[size_t(i)] = empty(w.shape());
    }
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < 4; ++i) {
      kernels::conv2d_forward(Device::cpu(), ys[size_t(i)], x, w, Tensor(), p);
      kernels::conv2d_backward(Device::cpu(), gxs[size_t(i)], gws[size_t(i)], Tensor(), gy, x, w, p);
    }
    for (int i = 0; i < 4; ++i) {
      CHECK(rel_err(values(ys[size_t(i)]), values(y)) < 1e-5);
      CHECK(rel_err(values(gxs[size_t(i)]), values(gx_ref)) < 1e-5);
      CHECK(rel_err(values(gws[size_t(i)]), values(gw_ref)) < 1e-5);
    }
  }
}
