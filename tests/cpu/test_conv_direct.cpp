// The direct stride-1 convolution (cpu/conv_direct.cpp), on each loop the CPU has (AVX-512, AVX2;
// one it lacks is skipped): forward, input and weight gradients against the double reference
// loops over widths around the vector lanes, heights around the row blocks, channel counts around
// the channel blocks, groups, paddings (past k - 1 the input gradient falls back to im2col), batches
// below and above the thread count, strided inputs, and values small enough that only a relative
// error can see a fault.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cpu/conv_direct.h"
#include "cpu/gemm.h"
#include "mdl.h"
#include "tests/support/conv_reference.h"
#include "switches/list/toggles.h"

using namespace mdl;
using namespace mdl::test;
using namespace mdl::test::conv;

namespace {

// max |a - b| / max |b|: relative to the values' own scale, however small.
double scaled_err(const V& a, const V& b) {
  REQUIRE(a.size() == b.size());
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  const double m = max_abs(b);
  return m > 0 ? e / m : e;
}

// The weight gradient sums a block of samples' pixels in one running f32 sum per weight (up to a
// few thousand terms here), so its rounding grows with the block; a wrong term would cost ~1e-2.
constexpr double kGradWeightTol = 1e-5;

struct DirectConv {
  bool saved = toggles::direct_conv();
  explicit DirectConv(bool on) { toggles::set_direct_conv(on); }
  ~DirectConv() { toggles::set_direct_conv(saved); }
};

std::vector<ConvCase> direct_cases() {
  std::vector<ConvCase> cs;
  for (int64_t w : {1, 7, 8, 9, 14, 15, 16, 17, 23, 31, 33}) cs.push_back({2, 3, 5, w, 5, 3, 3, {1, 1}, {1, 1}});
  for (int64_t h : {1, 2, 5, 6, 7, 12, 13, 14, 19}) cs.push_back({2, 2, h, 9, 4, 3, 3, {1, 1}, {1, 1}});
  for (int64_t co : {1, 2, 3, 5, 13, 40}) cs.push_back({1, 4, 6, 10, co, 3, 3, {1, 1}, {1, 1}});
  cs.push_back({3, 6, 9, 11, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, false});                 // groups
  cs.push_back({2, 9, 7, 8, 12, 3, 3, {1, 1}, {1, 1}, {1, 1}, 3, true, "strided"});       // groups, strided x
  cs.push_back({2, 5, 6, 7, 7, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true, "channels_last"});  // 1x1
  cs.push_back({2, 3, 10, 12, 4, 5, 5, {1, 1}, {2, 2}});
  cs.push_back({2, 3, 9, 18, 4, 2, 3, {1, 1}, {1, 0}});            // asymmetric kernel and padding
  cs.push_back({2, 3, 5, 5, 4, 7, 7, {1, 1}, {3, 3}});             // kernel wider than the input
  cs.push_back({2, 3, 6, 6, 4, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1});  // no padding
  cs.push_back({2, 3, 6, 9, 4, 3, 3, {1, 1}, {3, 2}});             // padding past k - 1
  cs.push_back({3, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}});         // SimpleCNN's second conv
  cs.push_back({2, 48, 6, 40, 8, 3, 3, {1, 1}, {1, 1}});           // input channels in blocks of 15
  cs.push_back({1, 16, 28, 28, 20, 3, 3, {1, 1}, {1, 1}});         // one sample: channel blocks shared
  cs.push_back({5, 2, 40, 37, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false, "strided"});
  cs.push_back({7, 8, 40, 40, 16, 3, 3, {1, 1}, {1, 1}});  // the weight gradient in several blocks of samples
  // The row tile (8 or more input and output channels per group): groups, a 5x5 and a 1x1 kernel,
  // rows cut into uneven tiles, output channels short of a whole block, strided input.
  cs.push_back({2, 16, 7, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2});
  cs.push_back({2, 8, 10, 12, 8, 5, 5, {1, 1}, {2, 2}});
  cs.push_back({2, 8, 6, 7, 16, 1, 1, {1, 1}, {0, 0}});
  cs.push_back({2, 8, 5, 17, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, "strided"});
  return cs;
}

// Forward and both gradients of conv2d with the direct path on the forced GEMM kernel's loop,
// against the reference loops; x and w scaled by `scale`.
void check_case(const ConvCase& c, double scale, Generator& gen) {
  INFO(describe(c), " scale ", scale);
  ConvRun r = run_conv(c, kF32, gen);
  r.xleaf = (r.xleaf * scale).detach().requires_grad_();
  r.w = (r.w * scale).detach().requires_grad_();
  if (c.bias) r.b = (r.b * scale * scale).detach().requires_grad_();
  r.x = view_of(r.xleaf, c.layout);
  REQUIRE(cpu::direct_conv_applies(r.x, r.w, kernels::Conv2dParams{.pad_h = c.p[0], .pad_w = c.p[1], .groups = c.g}));
  r.y = F::conv2d(r.x, r.w, r.b, c.s, c.p, c.d, c.g);
  const V ref = ref_conv(c, values(r.x), values(r.w), c.bias ? values(r.b) : V{});
  CHECK(scaled_err(values(r.y), ref) < 2e-6);
  Tensor gy = randn(r.y.shape(), kF32, &gen) * scale;
  sum(r.y * gy).backward();
  const RefGrads g = ref_conv_backward(c, values(r.x), values(r.w), values(gy));
  CHECK(scaled_err(values(view_of(r.xleaf.grad(), c.layout)), g.gx) < 2e-6);
  CHECK(scaled_err(values(r.w.grad()), g.gw) < kGradWeightTol);
  if (c.bias) CHECK(scaled_err(values(r.b.grad()), g.gb) < 2e-6);
  // The direct weight-gradient loop itself, also where conv2d_backward leaves the weight gradient
  // to im2col + GEMM (direct_weight_grad_pays: the AVX2 loop with several input channels).
  const kernels::Conv2dParams p{.pad_h = c.p[0], .pad_w = c.p[1], .groups = c.g};
  Tensor gw = empty(r.w.shape()), gb = c.bias ? empty({r.w.size(0)}) : Tensor();
  cpu::direct_conv2d_backward_weight(gw, gb, gy, r.x, p);
  CHECK(scaled_err(values(gw), g.gw) < kGradWeightTol);
  if (c.bias) CHECK(scaled_err(values(gb), g.gb) < 2e-6);
}

void check_kernel(cpu::GemmKernel k, const char* name) {
  cpu::ScopedGemmKernel forced(k);
  DirectConv on(true);
  REQUIRE(cpu::direct_conv_kernel_name() != nullptr);
  CHECK(std::string(cpu::direct_conv_kernel_name()) == name);
  Generator gen(41);
  for (const ConvCase& c : direct_cases())
    for (double scale : {1.0, 1e-3}) check_case(c, scale, gen);
}

}  // namespace

TEST_CASE("direct conv on the AVX-512 loop matches the reference loops" *
          doctest::skip(!cpu::gemm_kernel_available(cpu::GemmKernel::avx512))) {
  check_kernel(cpu::GemmKernel::avx512, "avx512f 4x6x16");
}

TEST_CASE("direct conv on the AVX2 loop matches the reference loops" *
          doctest::skip(!cpu::gemm_kernel_available(cpu::GemmKernel::avx2))) {
  check_kernel(cpu::GemmKernel::avx2, "avx2-fma 3x3x8");
}

// The direct conv's tiles on bf16 pairs (VDPBF16PS, and its emulation in AVX-512F, which runs on any
// AVX-512 CPU), for f32 tensors holding bf16 values: forward, input and weight gradients against the
// reference loops (products of bf16 values are exact, so f32's tolerances hold), over odd channel
// counts (a zero channel pads the last pair) and odd widths (a zero pixel pads the weight
// gradient's last pair), groups, kernel sizes, uneven row tiles, short channel blocks, a strided
// input, one sample, one input channel (the plane tile forward, the pair tile for the weights), and
// small values. The f32 tiles sum in another order: their results differ, which shows that the
// pair tiles ran.
void check_pair_tile(cpu::GemmKernel k) {
  cpu::ScopedGemmKernel forced(k);
  DirectConv on(true);
  Generator gen(45);
  const ConvCase cases[] = {{2, 16, 7, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},
                            {2, 9, 10, 12, 8, 5, 5, {1, 1}, {2, 2}},
                            {2, 15, 6, 7, 16, 1, 1, {1, 1}, {0, 0}},
                            {2, 8, 5, 17, 23, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true, "strided"},
                            {3, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}},
                            {1, 11, 12, 20, 20, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false},
                            {3, 1, 9, 11, 8, 3, 3, {1, 1}, {1, 1}}};
  const auto bf16_values = [](const Tensor& t) { return t.to(kBF16).to(kF32); };
  for (const ConvCase& c : cases)
    for (double scale : {1.0, 1e-3}) {
      INFO(describe(c), " scale ", scale);
      ConvRun r = run_conv(c, kF32, gen);
      const Tensor x = view_of(bf16_values(r.xleaf * scale), c.layout), w = bf16_values(r.w * scale);
      const Tensor b = c.bias ? r.b * (scale * scale) : Tensor();
      const kernels::Conv2dParams p{.pad_h = c.p[0], .pad_w = c.p[1], .groups = c.g, .bf16_values = true};
      REQUIRE(cpu::direct_conv_applies(x, w, p));
      const Tensor y = empty({c.N, c.Cout, c.H + 2 * c.p[0] - c.kh + 1, c.W + 2 * c.p[1] - c.kw + 1});
      cpu::direct_conv2d_forward(y, x, w, b, p);
      CHECK(scaled_err(values(y), ref_conv(c, values(x), values(w), c.bias ? values(b) : V{})) < 2e-6);
      const Tensor gy = bf16_values(randn(y.shape(), kF32, &gen) * scale);
      const Tensor gx = empty({c.N, c.C, c.H, c.W}), gw = empty(w.shape());
      cpu::direct_conv2d_backward_input(gx, gy, w, p);
      cpu::direct_conv2d_backward_weight(gw, Tensor(), gy, x, p);
      const RefGrads ref = ref_conv_backward(c, values(x), values(w), values(gy));
      CHECK(scaled_err(values(gx), ref.gx) < 2e-6);
      CHECK(scaled_err(values(gw), ref.gw) < kGradWeightTol);
      // The f32 tiles on the same values; the row tiles only with 8 or more channels each way.
      cpu::ScopedGemmKernel f32(cpu::GemmKernel::avx512);
      const Tensor y32 = empty(y.shape()), gx32 = empty(gx.shape()), gw32 = empty(gw.shape());
      cpu::direct_conv2d_forward(y32, x, w, b, p);
      cpu::direct_conv2d_backward_input(gx32, gy, w, p);
      cpu::direct_conv2d_backward_weight(gw32, Tensor(), gy, x, p);
      if (c.C / c.g >= 8 && c.Cout / c.g >= 8) {
        CHECK(values(y32) != values(y));
        CHECK(values(gx32) != values(gx));
      }
      CHECK(values(gw32) != values(gw));
    }
}

TEST_CASE("direct conv: the bf16 pair tiles emulated in AVX-512F match the reference loops" *
          doctest::skip(!cpu::gemm_kernel_available(cpu::GemmKernel::avx512_bf16_emulated))) {
  check_pair_tile(cpu::GemmKernel::avx512_bf16_emulated);
}
TEST_CASE("direct conv: the bf16 pair tiles on VDPBF16PS match the reference loops" *
          doctest::skip(!cpu::gemm_kernel_available(cpu::GemmKernel::avx512_bf16))) {
  check_pair_tile(cpu::GemmKernel::avx512_bf16);
}

// The weight gradient's sums run in one order whatever the thread count: a conv with many tiles
// (SimpleCNN's second) and one with few, whose batch is split into chunks.
TEST_CASE("direct conv: the weight gradient has the same bits at any thread count") {
  if (cpu::direct_conv_kernel_name() == nullptr) return;
  DirectConv on(true);
  const int saved = get_num_threads();
  Generator gen(44);
  for (const ConvCase& c :
       {ConvCase{6, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}}, ConvCase{9, 1, 20, 20, 8, 3, 3, {1, 1}, {1, 1}}}) {
    INFO(describe(c));
    const Tensor x = randn({c.N, c.C, c.H, c.W}, kF32, &gen), gy = randn({c.N, c.Cout, c.H, c.W}, kF32, &gen);
    const kernels::Conv2dParams p{.pad_h = 1, .pad_w = 1};
    std::vector<V> results;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      Tensor gw = empty({c.Cout, c.C, 3, 3});
      cpu::direct_conv2d_backward_weight(gw, Tensor(), gy, x, p);
      results.push_back(values(gw));
    }
    set_num_threads(saved);
    CHECK(results[0] == results[1]);
    CHECK(results[0] == results[2]);
  }
}

TEST_CASE("direct conv: where it does not apply, and its switch") {
  Generator gen(42);
  const Tensor x = randn({2, 4, 8, 8}, kF32, &gen), w = randn({6, 4, 3, 3}, kF32, &gen);
  const kernels::Conv2dParams base{.pad_h = 1, .pad_w = 1};
  {
    DirectConv off(false);
    CHECK(cpu::direct_conv_kernel_name() == nullptr);
    CHECK_FALSE(cpu::direct_conv_applies(x, w, base));
  }
  if (cpu::direct_conv_kernel_name() == nullptr) return;  // no AVX2: nothing else to tell apart
  CHECK(cpu::direct_conv_applies(x, w, base));
  CHECK_FALSE(cpu::direct_conv_applies(x.to(kF64), w.to(kF64), base));
  CHECK_FALSE(cpu::direct_conv_applies(x, w, {.stride_h = 2, .pad_h = 1, .pad_w = 1}));
  CHECK_FALSE(cpu::direct_conv_applies(x, w, {.pad_h = 1, .pad_w = 1, .dil_w = 2}));
  // bf16 values go direct unless AMX's GEMM runs them; the row tile multiplies them in pairs where VDPBF16PS runs.
  const kernels::Conv2dParams bf16_values{.pad_h = 1, .pad_w = 1, .bf16_values = true};
  CHECK(cpu::direct_conv_applies(x, w, bf16_values) == (cpu::gemm_bf16_values_kernel() != cpu::GemmKernel::amx_bf16));
  if (cpu::gemm_kernel_available(cpu::GemmKernel::avx512_bf16_emulated)) {
    cpu::ScopedGemmKernel emulated(cpu::GemmKernel::avx512_bf16_emulated);
    CHECK(cpu::direct_conv_applies(x, w, bf16_values));
  }
  {
    toggles::Scoped amx(toggles::Toggle::amx_bf16, false), dot(toggles::Toggle::avx512_bf16_dot, false);
    CHECK(cpu::direct_conv_applies(x, w, bf16_values));
  }
  CHECK_FALSE(cpu::direct_conv_applies(x, randn({4, 1, 3, 3}, kF32, &gen), {.pad_h = 1, .pad_w = 1, .groups = 4}));
  CHECK(cpu::direct_conv_backward_input_applies(x, w, {.pad_h = 2, .pad_w = 2}));
  CHECK_FALSE(cpu::direct_conv_backward_input_applies(x, w, {.pad_h = 3, .pad_w = 1}));
  {
    cpu::ScopedGemmKernel scalar(cpu::GemmKernel::scalar);
    CHECK(cpu::direct_conv_kernel_name() == nullptr);
  }
  // Switched off, the same convs run im2col + GEMM and still match the reference.
  DirectConv off(false);
  Generator g2(43);
  for (const ConvCase& c : direct_cases()) {
    INFO(describe(c));
    ConvRun r = run_conv(c, kF32, g2, true);
    const V ref = ref_conv(c, values(r.x), values(r.w), c.bias ? values(r.b) : V{});
    CHECK(scaled_err(values(r.y), ref) < 2e-6);
  }
}

// More than 1 MiB of weights a group: the forward and the input gradient run im2col + GEMM (the
// same bits as with the direct loop switched off, other bits than the loop's, whose sums run in
// another order), the weight gradient the direct loop; with im2col_large_weights off, all direct.
// 288 pixels a weight sums over: past one of the GEMM's K blocks, so its order is not the loop's
// at any thread count (at 50 pixels a one-thread GEMM summed in the loop's order, with its bits).
TEST_CASE(
    "direct conv: convs with large weights run forward and input gradient on im2col, the weight gradient direct") {
  if (cpu::direct_conv_kernel_name() == nullptr) return;  // no AVX2: no direct loop to route around
  Generator gen(47);
  const ConvCase c{2, 176, 12, 12, 176, 3, 3, {1, 1}, {1, 1}};  // 278,784 weights: 1.06 MiB as f32
  const Tensor x = randn({c.N, c.C, c.H, c.W}, kF32, &gen), w = randn({c.Cout, c.C, 3, 3}, kF32, &gen) * 0.05;
  const Tensor b = randn({c.Cout}, kF32, &gen), gy = randn({c.N, c.Cout, c.H, c.W}, kF32, &gen);
  const kernels::Conv2dParams p{.pad_h = 1, .pad_w = 1};
  CHECK_FALSE(cpu::direct_conv_weights_fit(w, p));
  CHECK(cpu::direct_conv_weights_fit(randn({176, 88, 3, 3}, kF32, &gen), {.pad_h = 1, .pad_w = 1, .groups = 2}));
  CHECK(cpu::direct_conv_weights_fit(randn({128, 128, 3, 3}, kF32, &gen), p));
  NoGradGuard no_grad;
  struct Results {
    V y, gx, gw;
  };
  const auto through_conv2d = [&] {
    const Tensor gx = empty(x.shape()), gw = empty(w.shape());
    kernels::conv2d_backward(Device::cpu(), gx, gw, Tensor(), gy, x, w, p);
    return Results{values(F::conv2d(x, w, b, {1, 1}, {1, 1})), values(gx), values(gw)};
  };
  const Results routed = through_conv2d();
  Results im2col, all_direct;
  {
    DirectConv off(false);
    im2col = through_conv2d();
  }
  {
    toggles::Scoped direct(toggles::Toggle::im2col_large_weights, false);
    CHECK(cpu::direct_conv_weights_fit(w, p));
    all_direct = through_conv2d();
  }
  const V ref = ref_conv(c, values(x), values(w), values(b));
  const RefGrads g = ref_conv_backward(c, values(x), values(w), values(gy));
  for (const Results* r : std::initializer_list<const Results*>{&routed, &im2col, &all_direct}) {
    CHECK(scaled_err(r->y, ref) < 2e-6);
    CHECK(scaled_err(r->gx, g.gx) < 2e-6);
    CHECK(scaled_err(r->gw, g.gw) < kGradWeightTol);
  }
  CHECK(routed.y == im2col.y);
  CHECK(routed.y != all_direct.y);
  CHECK(routed.gx == im2col.gx);
  CHECK(routed.gx != all_direct.gx);
  CHECK(routed.gw == all_direct.gw);
  CHECK(routed.gw != im2col.gw);
}
