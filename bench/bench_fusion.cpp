// Fused kernels against the same math composed of tensor ops, forward and backward, in one
// run: cross-entropy (log-softmax + NLL in one pass over the logits, one backward pass; off:
// log_softmax then nll_loss) and layer_norm (one pass for statistics, one for the output; a fused
// backward; off: mean/var/rsqrt composed of ops). Both sides are nn::functional's own code, with
// the fused_cross_entropy and fused_layer_norm switches off and on. And a ReLU beside a 2x2 max pool
// (one pass with a byte per window; off: max pool with int64 indices, then the ReLU), through
// nn::Sequential with the fused_pool_relu switch off and on. The fused cross-entropy also runs
// with wide_softmax off and on, and the fused layer norm with wide_layer_norm off and on: their row
// loops on 4 floats, or on the CPU's widest vectors.
#include <benchmark/benchmark.h>

#include "bench/recording_reporter.h"
#include "mdl.h"
#include "switches/list/toggles.h"
#include "nn/functional.h"
#include "bench/switch_bench.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

// GPT-sized logits: 2048 rows (batch 4 x context 512) over a 8192-token vocabulary.
constexpr int64_t kRows = 2048, kVocab = 8192;
// Transformer activations: 8 x 512 tokens of width 768.
constexpr int64_t kTokens = 4096, kWidth = 768;

// cross_entropy as nn::functional runs it, forward and backward, with the current switches.
void cross_entropy_loop(benchmark::State& state) {
  Generator g(1);
  Tensor logits = randn({kRows, kVocab}, {}, &g).requires_grad_(true);
  Tensor target = randint(0, kVocab, {kRows}, kI64, &g);
  for (auto _ : state) {
    Tensor loss = F::cross_entropy(logits, target);
    loss.backward();
    logits.zero_grad();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kRows * kVocab * 4 * 3);  // read, read, write grad
}

// One fused node, or (fused_cross_entropy off) log_softmax then nll_loss.
void cross_entropy_pair(benchmark::State& state, bool fused) {
  toggles::Scoped scoped(toggles::Toggle::fused_cross_entropy, fused);
  cross_entropy_loop(state);
}

// The fused node's row loops on 4 floats, or (wide_softmax on) 16 or 8.
void wide_rows_pair(benchmark::State& state, bool wide) {
  toggles::Scoped scoped(toggles::Toggle::wide_softmax, wide);
  cross_entropy_loop(state);
}

// Layer norm on (4096, 768) f32 through nn::functional, forward and backward, as the switches are set.
void layer_norm_fwd_bwd(benchmark::State& state) {
  Generator g(2);
  Tensor x = randn({kTokens, kWidth}, {}, &g).requires_grad_(true);
  Tensor w = ones({kWidth}).requires_grad_(true), b = zeros({kWidth}).requires_grad_(true);
  Tensor dy = randn({kTokens, kWidth}, {}, &g);
  for (auto _ : state) {
    Tensor y = F::layer_norm(x, {kWidth}, w, b);
    y.backward(dy);
    x.zero_grad(), w.zero_grad(), b.zero_grad();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kTokens * kWidth * 4 * 5);
}

// Fused kernels, or (fused_layer_norm off) composed of ops.
void layer_norm_pair(benchmark::State& state, bool fused) {
  const bool was = toggles::fused_layer_norm();
  toggles::set_fused_layer_norm(fused);
  layer_norm_fwd_bwd(state);
  toggles::set_fused_layer_norm(was);
}

// The fused kernels' rows on the CPU's widest vectors, or (wide_layer_norm off) on 4 floats.
void wide_layer_norm_pair(benchmark::State& state, bool wide) {
  const bool was = toggles::wide_layer_norm();
  toggles::set_wide_layer_norm(wide);
  layer_norm_fwd_bwd(state);
  toggles::set_wide_layer_norm(was);
}

// SimpleCNN's first ReLU and 2x2 max pool, as nn::Sequential runs them: one fused op, or
// (fused_pool_relu off) the pool, then the ReLU (pool_before_relu's order), forward and backward.
void relu_maxpool_pair(benchmark::State& state, bool fused) {
  const bool was = toggles::fused_pool_relu();
  toggles::set_fused_pool_relu(fused);
  constexpr int64_t kN = 128, kC = 32, kHW = 28;
  Generator g(3);
  nn::Sequential block{std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2)};
  Tensor x = randn({kN, kC, kHW, kHW}, {}, &g).requires_grad_(true);
  Tensor dy = randn({kN, kC, kHW / 2, kHW / 2}, {}, &g);
  for (auto _ : state) {
    Tensor y = block(x);
    y.backward(dy);
    x.zero_grad();
  }
  toggles::set_fused_pool_relu(was);
  // The fused op's traffic: x, y and a code byte per output forward; dy, the codes and dx backward.
  const int64_t in = kN * kC * kHW * kHW, out = in / 4;
  state.SetBytesProcessed(int64_t(state.iterations()) * (2 * (4 * in + 4 * out + out)));
}

}  // namespace

int main(int argc, char** argv) {
  for (bool on : {false, true}) {
    bench::register_switch("fused_cross_entropy", on, "2048x8192_fwd_bwd", cross_entropy_pair)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    bench::register_switch("wide_softmax", on, "2048x8192_fwd_bwd", wide_rows_pair)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    bench::register_switch("fused_layer_norm", on, "4096x768_fwd_bwd", layer_norm_pair)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    bench::register_switch("wide_layer_norm", on, "4096x768_fwd_bwd", wide_layer_norm_pair)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    bench::register_switch("fused_pool_relu", on, "relu_maxpool2x2_128x32x28x28_fwd_bwd", relu_maxpool_pair)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  if (!bench::run_benchmarks(argc, argv)) return 1;
  return 0;
}
