// bf16 convs on the CPU read their bf16 operands as they are and round each result once: with the
// bf16 multipliers off they run the f32 kernels on the same values, so every result is the f32
// conv's rounded to bf16, bit for bit, on every path (direct tiles, im2col, depthwise, strided and
// channels-last inputs); direct or unfolded (im2col), no f32 copy of an operand or a result is made.
#include <doctest/doctest.h>

#include <vector>

#include "mdl.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "tests/support/conv_reference.h"
#include "tests/support/profiler_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
using namespace mdl::test;
using namespace mdl::test::conv;

namespace {

// f32 leaves holding t's values, requiring grad.
Tensor f32_leaf(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor f = t.detach().to(kF32);
  f.requires_grad_();
  return f;
}

Tensor rounded(const Tensor& t) { return t.to(kBF16); }

}  // namespace

TEST_CASE("conv2d: bf16 on the CPU is the f32 conv of its values rounded once, bit for bit, forward and gradients") {
  toggles::Scoped amx(toggles::Toggle::amx_bf16, false), dot(toggles::Toggle::avx512_bf16_dot, false);
  Generator gen(31);
  std::vector<ConvCase> cases = forward_cases();
  cases.push_back({1, 64, 80, 80, 8, 3, 3, {2, 2}, {1, 1}});   // im2col: one sample in pixel tiles
  cases.push_back({4, 8, 11, 11, 12, 3, 3, {2, 2}, {1, 1}});   // im2col: samples in chunks
  cases.push_back({3, 192, 5, 5, 192, 3, 3, {1, 1}, {1, 1}});  // over 1 MiB of weights: im2col forward, grad x
  for (const ConvCase& c : cases) {
    INFO(describe(c));
    ConvRun r = run_conv(c, kBF16, gen, true);
    REQUIRE(r.y.dtype() == kBF16);
    const Tensor gy = randn(r.y.shape(), kBF16, &gen);
    r.y.backward(gy);

    const Tensor xf = f32_leaf(r.xleaf), wf = f32_leaf(r.w), bf = f32_leaf(r.b);
    const Tensor yf = F::conv2d(view_of(xf, c.layout), wf, bf, c.s, c.p, c.d, c.g);
    yf.backward(gy.to(kF32));
    CHECK(values(r.y) == values(rounded(yf)));
    CHECK(r.xleaf.grad().dtype() == kBF16);
    CHECK(values(r.xleaf.grad()) == values(rounded(xf.grad())));
    CHECK(values(r.w.grad()) == values(rounded(wf.grad())));
    if (c.bias) CHECK(values(r.b.grad()) == values(rounded(bf.grad())));
  }
}

TEST_CASE("conv2d: a bf16 conv makes no f32 copy, forward or backward, direct or unfolded (im2col)") {
  using profiler_test::find_all;
  const ConvCase cases[] = {{4, 16, 12, 12, 24, 3, 3, {1, 1}, {1, 1}},  // direct: the row tile
                            {2, 1, 28, 28, 8, 3, 3, {1, 1}, {1, 1}},    // direct: the plane tile (one input channel)
                            {1, 16, 9, 11, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2},  // direct: one sample, groups
                            {4, 8, 11, 11, 12, 3, 3, {2, 2}, {1, 1}},             // im2col: strided, samples in chunks
                            {2, 6, 10, 9, 6, 3, 3, {1, 1}, {2, 2}, {2, 2}, 3},    // im2col: dilated, groups
                            {1, 64, 80, 80, 8, 3, 3, {2, 2}, {1, 1}}};            // im2col: one sample in pixel tiles
  Generator gen(32);
  for (bool amx :
       {false, true}) {  // AMX (where the CPU has it) takes bf16 convs of more than one input channel a group to im2col
    toggles::Scoped scoped(toggles::Toggle::amx_bf16, amx);
    for (const ConvCase& c : cases) {
      INFO(describe(c), amx ? " amx on" : " amx off");
      ConvRun r = run_conv(c, kBF16, gen, true);
      const Tensor gy = randn(r.y.shape(), kBF16, &gen);
      profiler::Session prof({.memory = false});
      const Tensor y = F::conv2d(r.x, r.w, r.b, c.s, c.p, c.d, c.g);
      y.backward(gy);
      prof.stop();
      CHECK(find_all(prof, "conv2d", profiler::EventKind::Kernel).size() == 1);
      CHECK(find_all(prof, "conv2d_backward", profiler::EventKind::Kernel).size() == 1);
      CHECK(find_all(prof, "copy", profiler::EventKind::Kernel).empty());
    }
  }
}
