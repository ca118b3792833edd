// Mixed precision on the CPU: matmul and conv2d throughput with f32 against f16/bf16 operands
// (f32 accumulation), a SimpleCNN training step in f32 against autocast f16 + GradScaler, and
// the activation memory of a SimpleCNN and a small ViT forward under f32 and autocast (bytes
// held for backward after the forward, and the peak during it), and f16 kernels with per-element
// against block (F16C) conversion. Closing tables give the ratios.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/recording_reporter.h"
#include "ops/autocast.h"
#include "amp/grad_scaler.h"
#include "cpu/float_block.h"  // toggles::set_bulk_half_conversion
#include "cpu/gemm.h"         // toggles::set_amx_bf16
#include "bench/switch_bench.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/models/models.h"
#include "switches/list/toggles.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

void set_gflops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// C (n, n) = A (n, n) @ B (n, n) with both operands of dtype t.
void bm_matmul(benchmark::State& state, int64_t n, DType t) {
  Generator g(1);
  Tensor a = randn({n, n}, kF32, &g).to(t), b = randn({n, n}, kF32, &g).to(t);
  NoGradGuard ng;
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_gflops(state, 2.0 * double(n) * double(n) * double(n));
}

// SimpleCNN's second conv (32 -> 64, 3x3, 14x14, batch 128), forward, input and weight of dtype t.
void bm_conv(benchmark::State& state, DType t) {
  Generator g(2);
  Tensor x = randn({128, 32, 14, 14}, kF32, &g).to(t), w = (randn({64, 32, 3, 3}, kF32, &g) * 0.1).to(t);
  NoGradGuard ng;
  for (auto _ : state) {
    Tensor y = F::conv2d(x, w, Tensor(), {1, 1}, {1, 1});
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_gflops(state, 2.0 * 128 * 64 * 14 * 14 * 32 * 9);
}

// Training steps of `model` on one batch (x, y) for as long as the benchmark asks: forward and loss
// under autocast `dtype` when mixed, backward through a GradScaler (enabled for f16), opt's step.
void run_steps(benchmark::State& state, nn::Module& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y,
               bool mixed, DType dtype) {
  amp::GradScaler scaler({.enabled = mixed && dtype == kF16});
  for (auto _ : state) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(dtype, mixed);
      loss = F::cross_entropy(model.forward(x), y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  }
  state.counters["images/s"] = benchmark::Counter(double(x.size(0)), benchmark::Counter::kIsIterationInvariantRate);
}

// One SimpleCNN training step (batch 128, Adam): f32, or autocast f16 with the GradScaler, or
// autocast bf16 (no scaler: bf16 has f32's range); the f16 step with 16-bit values converted one
// by one (bulk false) or in F16C blocks.
void bm_train_step(benchmark::State& state, bool mixed, bool bulk = true, DType dtype = kF16) {
  toggles::set_bulk_half_conversion(bulk);
  manual_seed(3);
  auto model = nn::models::SimpleCNN(1, 10);
  optim::Adam opt(model->parameters(), {.lr = 1e-3});
  run_steps(state, *model, opt, randn({128, 1, 28, 28}), randint(0, 10, {128}), mixed, dtype);
  toggles::set_bulk_half_conversion(true);
}

// One ResNet-18 (CIFAR stem) training step on a batch of 32 3x32x32 images with SGD + momentum, in
// f32 or under autocast `dtype` (f16 with a GradScaler): 3x3 convs of 64-512 channels, batch norm
// and residual adds, where 16-bit matmuls have the most work to gain on.
void bm_resnet_step(benchmark::State& state, bool mixed, DType dtype) {
  manual_seed(3);
  auto model = nn::models::resnet18(10, 3);
  optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  run_steps(state, *model, opt, randn({32, 3, 32, 32}), randint(0, 10, {32}), mixed, dtype);
}

// A GPT training step (4 layers, width 256, 4 heads, context 128, batch 4, AdamW) under autocast
// bf16: its linear layers' f32 gradients written by the GEMMs (amp_f32_grads on) or rounded to bf16
// and converted back through to_dtype nodes (off).
void bm_gpt_step(benchmark::State& state, toggles::Toggle toggle, bool on) {
  toggles::Scoped flip(toggle, on);
  manual_seed(3);
  const nn::models::GPTOptions o{.context = 128, .n_layer = 4, .n_head = 4, .n_embd = 256};
  nn::models::GPT model(o);
  optim::AdamW opt(model.parameters(), {.lr = 1e-3});
  const Tensor x = randint(0, o.vocab_size, {4, 128}), y = randint(0, o.vocab_size, {4 * 128});
  for (auto _ : state) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kBF16);
      const Tensor logits = model.forward(x);
      loss = F::cross_entropy(logits.reshape({-1, logits.size(-1)}), y);
    }
    loss.backward();
    opt.step();
  }
  state.counters["tokens/s"] = benchmark::Counter(double(x.numel()), benchmark::Counter::kIsIterationInvariantRate);
}

// The f16 kernels of that step on SimpleCNN's first activation (128, 32, 28, 28): relu, its
// backward's mask (x <= 0), an add, and the 2x2 max pool forward and backward, with 16-bit values
// converted one by one (bulk false) or in F16C blocks (cpu/float_block.h).
void bm_half_kernel(benchmark::State& state, const std::string& kernel, bool bulk) {
  toggles::set_bulk_half_conversion(bulk);
  Generator g(5);
  Tensor x = randn({128, 32, 28, 28}, kF32, &g).to(kF16), y = randn({128, 32, 28, 28}, kF32, &g).to(kF16);
  Tensor gy = randn({128, 32, 14, 14}, kF32, &g).to(kF16);
  if (kernel == "max_pool_fwd_bwd") x.requires_grad_();
  for (auto _ : state) {
    Tensor r;
    if (kernel == "relu") r = relu(x);
    else if (kernel == "le_zero") r = le(x, zeros({}, kF16));
    else if (kernel == "add") r = x + y;
    else {
      x.zero_grad();
      F::max_pool2d(x, {2, 2}).backward(gy);
      r = x.grad();
    }
    benchmark::DoNotOptimize(r.raw_data());
  }
  toggles::set_bulk_half_conversion(true);
}

struct Memory {
  double held_mb, peak_mb;
};

// The bytes a training-mode forward holds for backward (live after it, less live before, less the
// output) and its peak above the starting point.
Memory forward_memory(nn::Module& model, const Tensor& x, bool mixed) {
  const int64_t before = memory_stats().live_bytes;
  reset_peak_memory();
  Tensor out;
  {
    amp::AutocastGuard autocast(kF16, mixed);
    out = model.forward(x);
  }
  const MemoryStats s = memory_stats();
  return {double(s.live_bytes - before - int64_t(out.nbytes())) / 1e6, double(s.peak_bytes - before) / 1e6};
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<DType, std::string>> dtypes = {{kF32, "f32"}, {kF16, "f16"}, {kBF16, "bf16"}};
  for (int64_t n : {256, 1024})
    for (const auto& [t, name] : dtypes)
      benchmark::RegisterBenchmark(("matmul/" + std::to_string(n) + "/" + name).c_str(),
                                   [n, t = t](benchmark::State& s) { bm_matmul(s, n, t); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.3);
  for (const auto& [t, name] : dtypes)
    benchmark::RegisterBenchmark(("conv_32to64_14x14_b128/" + name).c_str(),
                                 [t = t](benchmark::State& s) { bm_conv(s, t); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);
  for (bool mixed : {false, true})
    bench::register_switch("autocast", mixed, "simplecnn_train_step_b128",
                           [](benchmark::State& s, bool mixed) { bm_train_step(s, mixed); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  for (bool mixed : {false, true})
    bench::register_switch("autocast", mixed, "simplecnn_train_step_b128_bf16",
                           [](benchmark::State& s, bool mixed) { bm_train_step(s, mixed, true, kBF16); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  for (bool mixed : {false, true})
    bench::register_switch("autocast", mixed, "resnet18_train_step_b32_bf16",
                           [](benchmark::State& s, bool mixed) { bm_resnet_step(s, mixed, kBF16); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  for (toggles::Toggle t :
       {toggles::Toggle::amp_f32_grads, toggles::Toggle::amp_weight_cache, toggles::Toggle::linear_bias_epilogue})
    for (bool on : {false, true})
      bench::register_switch(toggles::name(t), on, "gpt_train_step_b4_t128_autocast_bf16",
                             [t](benchmark::State& s, bool on) { bm_gpt_step(s, t, on); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(1.0);
  for (bool amx : {false, true}) {
    bench::register_switch("amx_bf16", amx, "simplecnn_train_step_b128_autocast_bf16",
                           [](benchmark::State& s, bool amx) {
                             toggles::set_amx_bf16(amx);
                             bm_train_step(s, true, true, kBF16);
                             toggles::set_amx_bf16(true);
                           })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
    bench::register_switch("amx_bf16", amx, "matmul_1024_bf16",
                           [](benchmark::State& s, bool amx) {
                             toggles::set_amx_bf16(amx);
                             bm_matmul(s, 1024, kBF16);
                             toggles::set_amx_bf16(true);
                           })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);
  }
  // VDPBF16PS against widening, with AMX out of the way (on a CPU with AMX it would take both sides).
  for (bool dot : {false, true}) {
    auto with_dot = [](bool on, auto body) {
      toggles::Scoped amx(toggles::Toggle::amx_bf16, false), dot_switch(toggles::Toggle::avx512_bf16_dot, on);
      body();
    };
    bench::register_switch(
        "avx512_bf16_dot", dot, "simplecnn_train_step_b128_autocast_bf16",
        [with_dot](benchmark::State& s, bool on) { with_dot(on, [&] { bm_train_step(s, true, true, kBF16); }); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
    bench::register_switch(
        "avx512_bf16_dot", dot, "matmul_1024_bf16",
        [with_dot](benchmark::State& s, bool on) { with_dot(on, [&] { bm_matmul(s, 1024, kBF16); }); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.3);
  }
  for (bool bulk : {false, true})
    bench::register_switch("bulk_half_conversion", bulk, "simplecnn_train_step_b128_autocast_f16",
                           [](benchmark::State& s, bool bulk) { bm_train_step(s, true, bulk); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  for (const char* kernel : {"relu", "le_zero", "add", "max_pool_fwd_bwd"})
    for (bool bulk : {false, true})
      bench::register_switch(
          "bulk_half_conversion", bulk, "f16_" + std::string(kernel) + "_b128_c32_28x28",
          [kernel = std::string(kernel)](benchmark::State& s, bool bulk) { bm_half_kernel(s, kernel, bulk); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.3);

  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;

  // Speed of `fast` relative to `base` (>1: faster), by real time and by CPU time: under load (a
  // shared machine) the CPU time of a 1-thread run is the steadier measure.
  auto speedup = [&](const std::string& fast, const std::string& base) {
    const bench::RunResult *f = reporter.find(fast), *b = reporter.find(base);
    if (!f || !b) return std::pair<double, double>{0, 0};
    return std::pair<double, double>{b->real / f->real, b->cpu / f->cpu};
  };
  std::printf("\nthreads: %d; speed of 16-bit operands relative to f32 (>1: faster), by real time / CPU time:\n",
              get_num_threads());
  for (const std::string& base :
       {std::string("matmul/256/"), std::string("matmul/1024/"), std::string("conv_32to64_14x14_b128/")}) {
    const auto h = speedup(base + "f16", base + "f32"), b = speedup(base + "bf16", base + "f32");
    std::printf("  %-28s f16 %.2fx / %.2fx   bf16 %.2fx / %.2fx\n", base.c_str(), h.first, h.second, b.first, b.second);
  }
  auto pair_speedup = [&](const char* name, const std::string& case_name) {
    return speedup(bench::switch_benchmark(name, true, case_name), bench::switch_benchmark(name, false, case_name));
  };
  const auto step = pair_speedup("autocast", "simplecnn_train_step_b128");
  std::printf("  %-28s autocast f16 + GradScaler %.2fx / %.2fx\n", "simplecnn train step", step.first, step.second);
  const auto step_bf16 = pair_speedup("autocast", "simplecnn_train_step_b128_bf16");
  std::printf("  %-28s autocast bf16 %.2fx / %.2fx (bf16 GEMMs on %s)\n", "simplecnn train step", step_bf16.first,
              step_bf16.second, cpu::gemm_kernel_name(cpu::gemm_bf16_values_kernel()));
  const auto resnet_bf16 = pair_speedup("autocast", "resnet18_train_step_b32_bf16");
  std::printf("  %-28s autocast bf16 %.2fx / %.2fx\n", "resnet-18 train step b32", resnet_bf16.first,
              resnet_bf16.second);
  const auto amx_step = pair_speedup("amx_bf16", "simplecnn_train_step_b128_autocast_bf16");
  const auto amx_mm = pair_speedup("amx_bf16", "matmul_1024_bf16");
  std::printf("  amx_bf16 switch (bf16 GEMMs on AMX vs widened to f32): matmul 1024 %.2fx / %.2fx, "
              "autocast bf16 step %.2fx / %.2fx\n",
              amx_mm.first, amx_mm.second, amx_step.first, amx_step.second);
  const auto dot_step = pair_speedup("avx512_bf16_dot", "simplecnn_train_step_b128_autocast_bf16");
  const auto dot_mm = pair_speedup("avx512_bf16_dot", "matmul_1024_bf16");
  std::printf("  avx512_bf16_dot switch (bf16 GEMMs by VDPBF16PS vs widened to f32%s): matmul 1024 %.2fx / %.2fx, "
              "autocast bf16 step %.2fx / %.2fx\n",
              cpu::gemm_kernel_available(cpu::GemmKernel::avx512_bf16) ? "" : "; this CPU has no AVX512-BF16",
              dot_mm.first, dot_mm.second, dot_step.first, dot_step.second);
  std::printf("\nf16 on the CPU: 16-bit values converted one by one -> in F16C blocks, by real time / CPU time:\n");
  for (const char* case_name :
       {"simplecnn_train_step_b128_autocast_f16", "f16_relu_b128_c32_28x28", "f16_le_zero_b128_c32_28x28",
        "f16_add_b128_c32_28x28", "f16_max_pool_fwd_bwd_b128_c32_28x28"}) {
    const auto r = pair_speedup("bulk_half_conversion", case_name);
    std::printf("  %-40s %.2fx / %.2fx\n", case_name, r.first, r.second);
  }

  std::printf("\nactivation memory of a training-mode forward (MB): held for backward, and peak\n");
  std::printf("%-30s %10s %10s %10s %10s %8s\n", "model", "f32 held", "f32 peak", "amp held", "amp peak", "held");
  auto report = [](const char* name, nn::Module& m, const Tensor& x) {
    forward_memory(m, x, false);  // warm-up: first-use allocations out of the way
    const Memory f = forward_memory(m, x, false), a = forward_memory(m, x, true);
    std::printf("%-30s %10.1f %10.1f %10.1f %10.1f %7.2fx\n", name, f.held_mb, f.peak_mb, a.held_mb, a.peak_mb,
                f.held_mb / a.held_mb);
  };
  manual_seed(4);
  auto cnn = nn::models::SimpleCNN(1, 10);
  report("SimpleCNN, batch 128", *cnn, randn({128, 1, 28, 28}));
  auto vit = std::make_shared<nn::models::ViT>(nn::models::ViTOptions{.image_size = 28,
                                                                      .patch_size = 7,
                                                                      .in_channels = 1,
                                                                      .classes = 10,
                                                                      .dim = 128,
                                                                      .depth = 4,
                                                                      .heads = 4,
                                                                      .mlp_dim = 256});
  report("ViT dim 128, depth 4, batch 64", *vit, randn({64, 1, 28, 28}));
  return 0;
}
