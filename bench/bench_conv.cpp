// CPU conv2d forward and backward on SimpleCNN's convs, a ResNet 3x3 and a depthwise 3x3, in
// GFLOP/s (2 N Cout Ho Wo Cin/groups kH kW per forward, twice that per backward); each runs its
// direct kernel (depthwise_direct or direct_conv) and im2col + GEMM, the backward also with the
// weight gradient alone (as a first layer needs it), and a closing table gives the ratio; then
// ResNet-18's 512-channel conv and its training step with large-weight convs on im2col or direct;
// ResNet-18's first stride-2 conv in bf16; then SimpleCNN's first max pool, scalar vs vectorised;
// then a lighter architecture: a standard 3x3 conv against a depthwise separable one
// (nn::SeparableConv2d), as a layer and as SimpleCNN's training step against SeparableCNN's.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bench/recording_reporter.h"
#include "mdl.h"
#include "nn/functional.h"
#include "kernels/conv.h"
#include "kernels/pool.h"
#include "cpu/conv.h"
#include "cpu/conv_direct.h"
#include "switches/list/toggles.h"
#include "bench/switch_bench.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

struct Layer {
  const char* name;
  int64_t N, Cin, H, W, Cout, k, pad, groups;
  double flops() const { return 2.0 * double(N * Cout * H * W) * double(Cin / groups * k * k); }  // stride 1, same size
};

const Layer kLayers[] = {
    {"cnn_conv1_1to32_28x28_b128", 128, 1, 28, 28, 32, 3, 1, 1},
    {"cnn_conv2_32to64_14x14_b128", 128, 32, 14, 14, 64, 3, 1, 1},
    {"resnet_3x3_64to64_32x32_b32", 32, 64, 32, 32, 64, 3, 1, 1},
    {"depthwise_3x3_c128_32x32_b32", 32, 128, 32, 32, 128, 3, 1, 128},
};

struct Inputs {
  Tensor x, w, b, gy, gx, gw, gb;
  explicit Inputs(const Layer& l) {
    Generator g(42);
    x = randn({l.N, l.Cin, l.H, l.W}, kF32, &g);
    w = randn({l.Cout, l.Cin / l.groups, l.k, l.k}, kF32, &g) * 0.1;
    b = randn({l.Cout}, kF32, &g);
    gy = randn({l.N, l.Cout, l.H, l.W}, kF32, &g);
    gx = empty(x.shape());
    gw = empty(w.shape());
    gb = empty(b.shape());
  }
};

void set_counter(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// The switch that picks direct or im2col for the layer: depthwise_direct for depthwise convs,
// else direct_conv.
const char* direct_switch(const Layer& l) {
  return l.groups > 1 && l.Cin == l.groups ? "depthwise_direct" : "direct_conv";
}

void forward(benchmark::State& state, const Layer& l, bool direct) {
  switches::set(direct_switch(l), direct);
  Inputs in(l);
  NoGradGuard ng;
  for (auto _ : state) {
    Tensor y = F::conv2d(in.x, in.w, in.b, {1, 1}, {l.pad, l.pad}, {1, 1}, l.groups);
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_counter(state, l.flops());
  switches::set(direct_switch(l), true);
}

// with_input_grad false: grad_w and grad_b alone (half the FLOPs), as for a network's first
// conv, whose input needs no gradient.
void backward(benchmark::State& state, const Layer& l, bool direct, bool with_input_grad) {
  switches::set(direct_switch(l), direct);
  Inputs in(l);
  const kernels::Conv2dParams p{1, 1, l.pad, l.pad, 1, 1, l.groups};
  const Tensor gx = with_input_grad ? in.gx : Tensor();
  for (auto _ : state) {
    kernels::conv2d_backward(Device::cpu(), gx, in.gw, in.gb, in.gy, in.x, in.w, p);
    benchmark::DoNotOptimize(in.gw.raw_data());
    benchmark::ClobberMemory();
  }
  set_counter(state, (with_input_grad ? 2.0 : 1.0) * l.flops());
  switches::set(direct_switch(l), true);
}

// ResNet-18's first downsampling conv, 3x3 / stride 2 / pad 1 from (32, 64, 32, 32) to 128 channels,
// on bf16 tensors (autocast bf16): im2col + GEMM, the unfolding at stride 2 (no switch). The backward
// computes both gradients.
void strided_bf16(benchmark::State& state, bool backward_pass) {
  Generator g(42);
  const Tensor x = randn({32, 64, 32, 32}, kF32, &g).to(kBF16), w = (randn({128, 64, 3, 3}, kF32, &g) * 0.05).to(kBF16);
  const Tensor gy = randn({32, 128, 16, 16}, kF32, &g).to(kBF16), gx = empty(x.shape(), kBF16),
               gw = empty(w.shape(), kBF16);
  const kernels::Conv2dParams p{2, 2, 1, 1, 1, 1, 1};
  NoGradGuard ng;
  for (auto _ : state) {
    if (backward_pass) {
      kernels::conv2d_backward(Device::cpu(), gx, gw, Tensor(), gy, x, w, p);
      benchmark::ClobberMemory();
    } else {
      Tensor y = F::conv2d(x, w, Tensor(), {2, 2}, {1, 1});
      benchmark::DoNotOptimize(y.raw_data());
    }
  }
  set_counter(state, (backward_pass ? 4.0 : 2.0) * 32 * 128 * 16 * 16 * 64 * 9);
}

// SimpleCNN's first max pool, 2x2 / stride 2 over (128, 32, 28, 28) f32: the scalar loop vs
// 4-float vectors (the max_pool_vectorized switch).
void max_pool(benchmark::State& state, bool vectorized) {
  toggles::set_max_pool_vectorized(vectorized);
  Generator g(42);
  const Tensor x = randn({128, 32, 28, 28}, kF32, &g);
  NoGradGuard ng;
  for (auto _ : state) {
    Tensor y = F::max_pool2d(x, {2, 2});
    benchmark::DoNotOptimize(y.raw_data());
  }
  toggles::set_max_pool_vectorized(true);
}

// A 3x3 conv 64 -> 128 over 32x32 maps, batch 32, forward and backward (input gradient too):
// nn::Conv2d against nn::SeparableConv2d (3x3 depthwise + 1x1 pointwise, 8.4x fewer multiply-adds).
void conv_block(benchmark::State& state, bool separable) {
  manual_seed(6);
  nn::ModulePtr m;
  if (separable) m = std::make_shared<nn::SeparableConv2d>(64, 128, 3, nn::SeparableConv2dOptions{.padding = {1, 1}});
  else m = std::make_shared<nn::Conv2d>(64, 128, 3, nn::Conv2dOptions{.padding = {1, 1}});
  Generator g(7);
  Tensor x = randn({32, 64, 32, 32}, kF32, &g).requires_grad_(), gy = randn({32, 128, 32, 32}, kF32, &g);
  for (auto _ : state) {
    x.zero_grad();
    m->zero_grad();
    m->forward(x).backward(gy);
    benchmark::DoNotOptimize(x.grad().raw_data());
  }
}

// One training step (batch 128, Adam) of SimpleCNN or of SeparableCNN, its second conv separable.
void cnn_step(benchmark::State& state, bool separable) {
  manual_seed(8);
  auto model = separable ? nn::models::SeparableCNN(1, 10) : nn::models::SimpleCNN(1, 10);
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  Generator g(9);
  Tensor x = randn({128, 1, 28, 28}, kF32, &g), y = randint(0, 10, {128}, kI64, &g);
  for (auto _ : state) {
    opt.zero_grad();
    F::cross_entropy(model->forward(x), y).backward();
    opt.step();
  }
}

// ResNet-18's last stage: a 3x3 conv 512 -> 512 over 4x4 maps, batch 32 (9 MiB of weights),
// forward, or backward with the input gradient, with im2col_large_weights at `on`.
const Layer kLargeWeights = {"resnet_3x3_512to512_4x4_b32", 32, 512, 4, 4, 512, 3, 1, 1};
void large_weights(benchmark::State& state, bool backward_pass, bool on) {
  toggles::set_im2col_large_weights(on);
  if (backward_pass) backward(state, kLargeWeights, true, true);
  else forward(state, kLargeWeights, true);
  toggles::set_im2col_large_weights(true);
}

// One ResNet-18 (CIFAR stem) training step, batch 32 of 3x32x32 images, SGD with momentum, with
// im2col_large_weights at `on`.
void resnet_step(benchmark::State& state, bool on) {
  toggles::set_im2col_large_weights(on);
  manual_seed(10);
  auto model = nn::models::resnet18(10, 3);
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  Generator g(11);
  Tensor x = randn({32, 3, 32, 32}, kF32, &g), y = randint(0, 10, {32}, kI64, &g);
  for (auto _ : state) {
    opt.zero_grad();
    F::cross_entropy(model->forward(x), y).backward();
    opt.step();
  }
  toggles::set_im2col_large_weights(true);
}

// The SimpleCNN step with the toggle `name` at `on`; the toggle gets its value back after.
// The step with switch `name` off or on. pool_before_relu runs with fused_pool_relu off on both
// sides: the fused op takes the pairs the swap would reorder.
void cnn_step_with(benchmark::State& state, const char* name, bool on) {
  const bool saved = switches::get(name), fused = toggles::fused_pool_relu();
  if (std::string_view(name) == "pool_before_relu") toggles::set_fused_pool_relu(false);
  switches::set(name, on);
  cnn_step(state, false);
  switches::set(name, saved);
  toggles::set_fused_pool_relu(fused);
}

}  // namespace

int main(int argc, char** argv) {
  // Each layer runs direct and via im2col, under the switch direct_switch names:
  // <switch>/{off,on}/<pass>/<layer>.
  for (const Layer& l : kLayers) {
    auto add = [&](const char* pass, auto fn) {
      for (bool direct : {true, false})
        bench::register_switch(direct_switch(l), direct, std::string(pass) + "/" + l.name, fn)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime()
            ->MinTime(0.3);
    };
    add("fwd", [l](benchmark::State& s, bool direct) { forward(s, l, direct); });
    add("bwd", [l](benchmark::State& s, bool direct) { backward(s, l, direct, true); });
    // grad_w and grad_b alone, as for a network's first conv, whose input needs no gradient.
    add("bwd_weight", [l](benchmark::State& s, bool direct) { backward(s, l, direct, false); });
  }

  for (bool on : {false, true}) {
    for (bool bwd : {false, true})
      bench::register_switch("im2col_large_weights", on, std::string(bwd ? "bwd/" : "fwd/") + kLargeWeights.name,
                             [bwd](benchmark::State& s, bool on) { large_weights(s, bwd, on); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.3);
    bench::register_switch("im2col_large_weights", on, "resnet18_train_step_b32", resnet_step)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  }

  for (bool bwd : {false, true})
    benchmark::RegisterBenchmark(bwd ? "BM_StridedConvBf16/bwd/resnet_3x3_64to128_32x32_s2_b32"
                                     : "BM_StridedConvBf16/fwd/resnet_3x3_64to128_32x32_s2_b32",
                                 [bwd](benchmark::State& s) { strided_bf16(s, bwd); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);

  for (bool vectorized : {false, true})
    bench::register_switch("max_pool_vectorized", vectorized, "b128_c32_28x28", max_pool)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);

  for (bool separable : {false, true}) {
    bench::register_switch("separable_conv", separable, "conv_3x3_64to128_32x32_b32_fwd_bwd", conv_block)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);
    bench::register_switch("separable_conv", separable, "cnn_train_step_b128", cnn_step)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }

  for (const char* name : {"direct_conv", "avx512_gemm", "pool_before_relu", "fused_pool_relu", "bf16_gemm"})
    for (bool on : {false, true})
      bench::register_switch(name, on, "simplecnn_train_step_b128",
                             [name](benchmark::State& s, bool on) { cnn_step_with(s, name, on); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);

  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;

  std::printf("\nthreads: %d; direct conv loop: %s; direct kernel vs im2col + GEMM:\n", get_num_threads(),
              cpu::direct_conv_kernel_name() ? cpu::direct_conv_kernel_name() : "none on this CPU");
  std::printf("%-36s %10s %16s %16s %8s\n", "layer", "pass", "direct GFLOP/s", "im2col GFLOP/s", "ratio");
  for (const Layer& l : kLayers)
    for (const char* pass : {"fwd", "bwd", "bwd_weight"}) {
      const std::string id = std::string(pass) + "/" + l.name;
      const bench::RunResult* d = reporter.find(bench::switch_benchmark(direct_switch(l), true, id));
      const bench::RunResult* i = reporter.find(bench::switch_benchmark(direct_switch(l), false, id));
      if (!d || !i) continue;
      const double direct = d->counter("GFLOP/s", 1e-9), im2col = i->counter("GFLOP/s", 1e-9);
      std::printf("%-36s %10s %16.2f %16.2f %7.2fx\n", l.name, pass, direct, im2col, direct / im2col);
    }
  return 0;
}
