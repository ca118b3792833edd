// The fused ReLU(2x2 max pool) (functional::max_pool2d_relu, cpu/pool_relu.cpp) against max_pool2d
// then relu, output and input gradient bit for bit: f32, bf16, f16 and f64, on every kernel the
// CPU has (AVX-512 planes, and the loops the other GEMM kernels leave it to), row widths around 8
// and 16 windows, odd heights and widths (the uncovered row and column get +0), strided input,
// values from a small set (ties) with NaN, infinities, -0 and windows with no positive value, and
// gradients with -0 and NaN. The AVX-512 planes called directly stop at their last output. In
// nn::Sequential, the fused op replaces both layers (either order) and gives the unfused result.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/pool_relu_rows.h"
#include "kernels/pool.h"
#include "mdl.h"
#include "nn/container.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "switches/list/toggles.h"
#include "tests/support/profiler_test_util.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

// (N, C, H, W) of values from {-inf, -2, -1, -0, 0, 1, 2, inf, NaN}, mostly the finite ones.
std::vector<float> tied(int64_t n, uint32_t seed) {
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const float pick[] = {-2, -1, -0.0f, 0, 1, 2, -1, 1, -2, 2, -inf, inf, nan};
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = pick[(s >> 16) % 13];
  }
  return v;
}

// The bits of a floating tensor as float values widened exactly (f64 compared as f64).
std::vector<double> values(const Tensor& t) { return t.to(kF64).contiguous().to_vector<double>(); }

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const std::vector<double> x = values(a), y = values(b);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i] || std::signbit(x[i]) != std::signbit(y[i])) return false;
  }
  return true;
}

struct Run {
  Tensor y, gx;
};

Run run(const Tensor& x0, const Tensor& gy, bool fused, bool transposed) {
  Tensor x = x0.detach().clone().requires_grad_(true);
  const Tensor in = transposed ? transpose(x, 2, 3) : x;
  Tensor y = fused ? F::max_pool2d_relu(in, {2, 2}) : relu(F::max_pool2d(in, {2, 2}));
  y.backward(gy);
  return {y.detach(), x.grad()};
}

}  // namespace

TEST_CASE("max_pool2d_relu: every kernel gives relu(max_pool2d) bit for bit, values and gradients") {
  std::vector<cpu::GemmKernel> kernels_here;
  for (cpu::GemmKernel k : {cpu::GemmKernel::scalar, cpu::GemmKernel::avx2, cpu::GemmKernel::avx512})
    if (cpu::gemm_kernel_available(k)) kernels_here.push_back(k);
  uint32_t seed = 11;
  for (DType dt : {kF32, kBF16, kF16, kF64})
    for (int64_t wo : {1, 3, 7, 8, 9, 14, 16, 17, 33})
      for (int64_t W : {2 * wo, 2 * wo + 1})
        for (int64_t H : {2, 3, 5, 8})
          for (bool transposed : {false, true}) {
            CAPTURE(dt);
            CAPTURE(W);
            CAPTURE(H);
            CAPTURE(transposed);
            const Shape xs = transposed ? Shape{2, 3, W, H} : Shape{2, 3, H, W};
            const Tensor x = from_vector(tied(2 * 3 * H * W, seed++), xs).to(dt);
            std::vector<float> g = tied(2 * 3 * (H / 2) * wo, seed++);
            for (float& v : g)
              if (std::isinf(v)) v = 0.5f;  // finite gradients, -0 and NaN kept
            const Tensor gy = from_vector(g, {2, 3, H / 2, wo}).to(dt);
            const Run want = run(x, gy, false, transposed);
            for (cpu::GemmKernel k : kernels_here) {
              CAPTURE(int(k));
              cpu::ScopedGemmKernel forced(k);
              const Run got = run(x, gy, true, transposed);
              CHECK(same_bits(got.y, want.y));
              CHECK(same_bits(got.gx, want.gx));
            }
          }
}

TEST_CASE("max_pool2d_relu: the AVX-512 planes write their Ho x Wo outputs and stop") {
  if (!cpu::gemm_kernel_available(cpu::GemmKernel::avx512)) return;
  for (int64_t wo : {1, 7, 8, 9, 16, 17})
    for (int64_t ho : {1, 2, 3, 4}) {
      CAPTURE(wo);
      CAPTURE(ho);
      const int64_t W = 2 * wo + 1, H = 2 * ho, n = ho * wo;  // an odd width: the last column unread
      const std::vector<float> x = tied(H * W, uint32_t(wo * 31 + ho));
      std::vector<float> out(size_t(n + 1), -7.0f);
      std::vector<uint8_t> codes(size_t(n + 1), 9);
      cpu::detail::max_pool_2x2_relu_plane_avx512(x.data(), W, ho, wo, out.data(), codes.data());
      CHECK(out[size_t(n)] == -7.0f);
      CHECK(codes[size_t(n)] == 9);
      for (int64_t i = 0; i < n; ++i) CHECK(codes[size_t(i)] <= kernels::kPoolReluBlocked);
      std::vector<uint16_t> xb(x.size()), outb(size_t(n + 1), 7);
      for (size_t i = 0; i < x.size(); ++i) xb[i] = BFloat16(x[i]).bits;
      std::vector<uint8_t> codes_b(size_t(n + 1), 9);
      cpu::detail::max_pool_2x2_relu_plane_avx512(xb.data(), W, ho, wo, outb.data(), codes_b.data());
      CHECK(outb[size_t(n)] == 7);
      CHECK(codes_b[size_t(n)] == 9);
      CHECK(std::vector<uint8_t>(codes_b.begin(), codes_b.end() - 1) ==
            std::vector<uint8_t>(codes.begin(), codes.end() - 1));
      // The backward fills grad_x (H, W) exactly: a guard beyond it stays.
      std::vector<float> g(size_t(n), 1.5f), gx(size_t(H * W + 1), -7.0f);
      cpu::detail::max_pool_2x2_relu_backward_plane_avx512(g.data(), codes.data(), H, W, ho, wo, gx.data());
      CHECK(gx[size_t(H * W)] == -7.0f);
      int64_t routed = 0;
      for (int64_t i = 0; i < H * W; ++i) routed += gx[size_t(i)] == 1.5f;
      int64_t open = 0;
      for (int64_t i = 0; i < n; ++i) open += codes[size_t(i)] != kernels::kPoolReluBlocked;
      CHECK(routed == open);
    }
}

TEST_CASE("max_pool2d_relu: other windows and unbatched and channels-last inputs") {
  Generator gen(4);
  const Tensor x = randn({2, 3, 9, 10}, kF32, &gen);
  // A 3x3 window with padding runs max_pool2d, then relu.
  CHECK(same_bits(F::max_pool2d_relu(x, {3, 3}, {2, 2}, {1, 1}), relu(F::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}))));
  // Stride given as the kernel's equals the default.
  CHECK(same_bits(F::max_pool2d_relu(x, {2, 2}, {2, 2}), relu(F::max_pool2d(x, {2, 2}))));
  const Tensor one = x.select(0, 1);  // (C, H, W)
  CHECK(same_bits(F::max_pool2d_relu(one, {2, 2}), relu(F::max_pool2d(one, {2, 2}))));
  const Tensor cl = contiguous(x, MemoryFormat::ChannelsLast);
  const Tensor y = F::max_pool2d_relu(cl, {2, 2});
  CHECK(y.memory_format() == MemoryFormat::ChannelsLast);
  CHECK(same_bits(y, relu(F::max_pool2d(x, {2, 2}))));
  CHECK_THROWS_WITH_AS(F::max_pool2d_relu(randn({1, 1, 1, 4}), {2, 2}),
                       doctest::Contains("max_pool2d_relu: kernel 2x2 is larger than the padded input"), Error);
  CHECK_THROWS_WITH_AS(F::max_pool2d_relu(randn({4, 4}), {2, 2}), doctest::Contains("max_pool2d_relu"), Error);
}

TEST_CASE("max_pool2d_relu: nn::Sequential fuses a ReLU beside a 2x2 max pool, with the unfused result") {
  using profiler_test::find_all;
  manual_seed(8);
  auto cnn = nn::models::SimpleCNN(1, 10, 28);
  auto pool_first = std::make_shared<nn::Sequential>(
      std::initializer_list<nn::ModulePtr>{std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::ReLU>()});
  Generator gen(9);
  for (auto& [model, x] : {std::pair<nn::ModulePtr, Tensor>{cnn, randn({3, 1, 28, 28}, kF32, &gen)},
                           std::pair<nn::ModulePtr, Tensor>{pool_first, randn({2, 4, 6, 6}, kF32, &gen)}}) {
    auto pass = [&, model = model, x = x](bool fused, bool swap) {
      toggles::Scoped f(toggles::Toggle::fused_pool_relu, fused);
      toggles::Scoped s(toggles::Toggle::pool_before_relu, swap);
      model->zero_grad();
      Tensor xi = x.detach().clone().requires_grad_(true);
      profiler::Session prof({.memory = false});
      Tensor y = (*model)(xi);
      y.backward(ones_like(y));
      prof.stop();
      CHECK(find_all(prof, "max_pool2x2_relu", profiler::EventKind::Kernel).size() ==
            (fused ? (model == cnn ? 2u : 1u) : 0u));
      CHECK(find_all(prof, "max_pool2d", profiler::EventKind::Kernel).size() ==
            (fused ? 0u : (model == cnn ? 2u : 1u)));
      std::vector<Tensor> out = {y.detach(), xi.grad()};
      for (const Tensor& p : model->parameters()) out.push_back(p.grad());
      return out;
    };
    const std::vector<Tensor> fused = pass(true, true), swapped = pass(false, true), written = pass(false, false);
    REQUIRE(fused.size() == written.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      CHECK(same_bits(fused[i], written[i]));
      CHECK(same_bits(swapped[i], written[i]));
    }
  }
}

TEST_CASE("max_pool2d_relu: nn::Sequential leaves a subclass of ReLU or MaxPool2d to its own forward") {
  using profiler_test::find_all;
  struct DoubledReLU : nn::ReLU {
    Tensor forward(const Tensor& x) override { return relu(x) * 2.0; }
  };
  Generator gen(12);
  const Tensor x = randn({2, 3, 6, 6}, kF32, &gen);
  nn::Sequential block{std::make_shared<DoubledReLU>(), std::make_shared<nn::MaxPool2d>(2)};
  toggles::Scoped fused(toggles::Toggle::fused_pool_relu, true);
  profiler::Session prof({.memory = false});
  const Tensor y = block(x);
  prof.stop();
  CHECK(find_all(prof, "max_pool2x2_relu", profiler::EventKind::Kernel).empty());
  CHECK(same_bits(y, F::max_pool2d(relu(x) * 2.0, {2, 2})));
}
