// scaled_dot_product_attention with the fused_attention switch on (the fused kernels) and off (the
// same call composed of autograd ops: matmul, masked_fill, softmax, masked_fill, matmul), causal,
// B=8 H=6 L=S=256 D=64 in f32: forward alone and forward+backward, with the memory the forward
// leaves held for backward and its peak, and the fused/composed speed ratios at the end. Also GPT's
// attention block with its heads packed in place or transposed around the kernel (packed_attention),
// and the fused kernels on the same shape in bf16 with their products on bf16 pairs by VDPBF16PS or
// widened to f32 (avx512_bf16_dot).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "bench/recording_reporter.h"
#include "bench/switch_bench.h"
#include "mdl.h"
#include "switches/list/toggles.h"
#include "nn/functional.h"

using namespace mdl;

namespace {

constexpr int64_t kB = 8, kH = 6, kL = 256, kD = 64;

struct Inputs {
  Tensor q, k, v, grad_out;
  explicit Inputs(DType t) {
    Generator g(42);
    q = randn({kB, kH, kL, kD}, {}, &g).to(t).requires_grad_();
    k = randn({kB, kH, kL, kD}, {}, &g).to(t).requires_grad_();
    v = randn({kB, kH, kL, kD}, {}, &g).to(t).requires_grad_();
    grad_out = randn({kB, kH, kL, kD}, {}, &g).to(t);
  }
};

Inputs& inputs(DType t = kF32) {
  static Inputs f32(kF32), bf16(kBF16);
  return t == kBF16 ? bf16 : f32;
}

Tensor attention(const Inputs& in) {
  return nn::functional::scaled_dot_product_attention(in.q, in.k, in.v, Tensor(), true);
}

// Bytes the forward leaves allocated (its output and what the graph saves), and its peak, in MB.
template <class F>
void memory_counters(benchmark::State& state, const F& forward) {
  const int64_t live0 = memory_stats().live_bytes;
  reset_peak_memory();
  Tensor out = forward();
  const MemoryStats m = memory_stats();
  state.counters["held_MB"] = double(m.live_bytes - live0) / 1e6;
  state.counters["peak_MB"] = double(m.peak_bytes - live0) / 1e6;
}

template <class F>
void iterate(benchmark::State& state, const F& forward, bool backward, Inputs& in) {
  for (auto _ : state) {
    Tensor out = forward(in);
    if (backward) {
      out.backward(in.grad_out);
      for (Tensor* t : {&in.q, &in.k, &in.v}) t->zero_grad();
    }
    benchmark::DoNotOptimize(out.raw_data());
  }
}

template <class F>
void run(benchmark::State& state, const F& forward, bool backward, bool fused) {
  const bool was = toggles::fused_attention();
  toggles::set_fused_attention(fused);
  Inputs& in = inputs();
  memory_counters(state, [&] { return forward(in); });
  iterate(state, forward, backward, in);
  toggles::set_fused_attention(was);
}

// The fused kernels in bf16, their products on bf16 pairs (on) or widened to f32 (off).
void run_bf16(benchmark::State& state, bool backward, bool pairs) {
  toggles::Scoped fused(toggles::Toggle::fused_attention, true), dot(toggles::Toggle::avx512_bf16_dot, pairs);
  iterate(state, attention, backward, inputs(kBF16));
}

// The f32 forward, its softmax down the keys on 16 floats (AVX-512F) or 8.
void run_wide_softmax(benchmark::State& state, bool wide) {
  toggles::Scoped fused(toggles::Toggle::fused_attention, true), lanes(toggles::Toggle::avx512_vec_math, wide);
  iterate(state, attention, false, inputs());
}

// GPT's self-attention block: MultiheadAttention (E=384, 6 heads) on (8, 256, 384) f32, causal,
// forward and backward, its heads read from the packed projection and written in place (on) or split,
// transposed and joined around the kernel (off).
void mha_block(benchmark::State& state, bool packed) {
  toggles::Scoped layout(toggles::Toggle::packed_attention, packed);
  manual_seed(0);
  nn::MultiheadAttention mha(384, 6);
  Generator g(7);
  Tensor x = randn({kB, kL, 384}, {}, &g).requires_grad_();
  Tensor gy = randn({kB, kL, 384}, {}, &g);
  auto step = [&] {
    Tensor y = mha.forward(x, x, x, Tensor(), Tensor(), true);
    y.backward(gy);
    x.zero_grad();
    mha.zero_grad();
  };
  step();
  for (auto _ : state) step();
}

}  // namespace

int main(int argc, char** argv) {
  for (bool on : {false, true})
    bench::register_switch("packed_attention", on, "mha_b8_t256_e384_h6_fwd_bwd", mha_block)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  for (const char* pass : {"fwd", "fwd_bwd"})
    for (bool on : {false, true})
      bench::register_switch(
          "fused_attention", on, pass,
          [bwd = std::string(pass) == "fwd_bwd"](benchmark::State& s, bool on) { run(s, attention, bwd, on); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  for (const char* pass : {"fwd", "fwd_bwd"})
    for (bool on : {false, true})
      bench::register_switch(
          "avx512_bf16_dot", on, std::string("attention_bf16_") + pass,
          [bwd = std::string(pass) == "fwd_bwd"](benchmark::State& s, bool on) { run_bf16(s, bwd, on); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  for (bool on : {false, true})
    bench::register_switch("balanced_threads", on, "attention_bf16_fwd",
                           [](benchmark::State& s, bool on) {
                             toggles::Scoped balanced(toggles::Toggle::balanced_threads, on);
                             run_bf16(s, false, true);
                           })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  for (bool on : {false, true})
    bench::register_switch("avx512_vec_math", on, "attention_f32_fwd", run_wide_softmax)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  bench::RecordingReporter reporter;
  if (!bench::run_benchmarks(argc, argv, reporter)) return 1;
  std::printf("\ncausal attention B=%lld H=%lld L=S=%lld D=%lld f32, threads: %d\n", (long long)kB, (long long)kH,
              (long long)kL, (long long)kD, get_num_threads());
  for (const char* pass : {"fwd", "fwd_bwd"}) {
    const bench::RunResult* f = reporter.find(bench::switch_benchmark("fused_attention", true, pass));
    const bench::RunResult* c = reporter.find(bench::switch_benchmark("fused_attention", false, pass));
    if (f && c)
      std::printf("%-16s fused %8.2f ms  composed %8.2f ms  speed-up x%.2f\n", pass, f->real, c->real,
                  c->real / f->real);
  }
  return 0;
}
