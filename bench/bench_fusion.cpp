// Fused kernels against the same math composed of tensor ops, forward and backward, in one
// run: cross-entropy (log-softmax + NLL in one pass over the logits, one backward pass) and
// layer_norm (one pass for statistics, one for the output; a fused backward). The composed
// versions are what a framework without those kernels runs: several passes and temporaries
// (layer_norm's is nn::functional's own, with the fused_layer_norm switch off).
#include <benchmark/benchmark.h>

#include "mdl.h"
#include "nn/functional.h"
#include "nn/layer_norm_options.h"
#include "bench/switch_bench.h"

using namespace mdl;
namespace F = mdl::nn::functional;

namespace {

// GPT-sized logits: 2048 rows (batch 4 x context 512) over a 8192-token vocabulary.
constexpr int64_t kRows = 2048, kVocab = 8192;
// Transformer activations: 8 x 512 tokens of width 768.
constexpr int64_t kTokens = 4096, kWidth = 768;

Tensor cross_entropy_composed(const Tensor& logits, const Tensor& target) {
  Tensor shifted = logits - max(logits, 1, true).first.detach();  // the shift has no gradient
  Tensor log_probs = shifted - log(sum(exp(shifted), {1}, true));
  return -mean(gather(log_probs, 1, target.unsqueeze(1)));
}

template <bool Fused>
void BM_CrossEntropy(benchmark::State& state) {
  Generator g(1);
  Tensor logits = randn({kRows, kVocab}, {}, &g).requires_grad_(true);
  Tensor target = randint(0, kVocab, {kRows}, kI64, &g);
  for (auto _ : state) {
    Tensor loss = Fused ? F::cross_entropy(logits, target) : cross_entropy_composed(logits, target);
    loss.backward();
    logits.zero_grad();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kRows * kVocab * 4 * 3);  // read, read, write grad
}

// layer_norm as nn::functional runs it: fused kernels, or (fused_layer_norm off) composed of ops.
void layer_norm_pair(benchmark::State& state, bool fused) {
  const bool was = F::fused_layer_norm();
  F::set_fused_layer_norm(fused);
  Generator g(2);
  Tensor x = randn({kTokens, kWidth}, {}, &g).requires_grad_(true);
  Tensor w = ones({kWidth}).requires_grad_(true), b = zeros({kWidth}).requires_grad_(true);
  Tensor dy = randn({kTokens, kWidth}, {}, &g);
  for (auto _ : state) {
    Tensor y = F::layer_norm(x, {kWidth}, w, b);
    y.backward(dy);
    x.zero_grad(), w.zero_grad(), b.zero_grad();
  }
  F::set_fused_layer_norm(was);
  state.SetBytesProcessed(int64_t(state.iterations()) * kTokens * kWidth * 4 * 5);
}

}  // namespace

int main(int argc, char** argv) {
  for (bool fused : {false, true}) {
    bench::register_switch(
        "fused_cross_entropy", fused, "2048x8192_fwd_bwd",
        [](benchmark::State& s, bool fused) { fused ? BM_CrossEntropy<true>(s) : BM_CrossEntropy<false>(s); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    bench::register_switch("fused_layer_norm", fused, "4096x768_fwd_bwd", layer_norm_pair)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
