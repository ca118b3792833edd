// Memory-bound f32 ops as users call them (each call allocates its output): elementwise at 1M
// and 16M elements (add also without the allocation; exp, tanh and GELU also as a libm loop),
// GELU's backward fused and composed, ReLU's backward masked_fill (also as the branchy loop it
// replaced), a broadcast add, a transposed copy, the f16 cast, sums and softmax. Bytes read plus
// written per call give the GB/s column.
#include <benchmark/benchmark.h>

#include <cmath>

#include "mdl.h"
#include "kernels/core.h"      // kernels::binary, for the allocation-free add
#include "cpu/copy_options.h"  // cpu::set_tiled_transpose
#include "bench/switch_bench.h"
#include "kernels/gelu.h"  // kernels::gelu_backward, the fused backward alone

using namespace mdl;

namespace {

constexpr int64_t k1M = int64_t(1) << 20, k16M = int64_t(1) << 24, kSide = 4096;

Tensor input(const Shape& shape) {
  Generator g(42);
  return rand(shape, {}, &g) * 4.0 - 2.0;  // uniform [-2, 2): half negative for relu
}

// Times f() per iteration and reports `bytes` moved per call.
template <class F>
void run(benchmark::State& state, int64_t bytes, const F& f) {
  for (auto _ : state) {
    Tensor r = f();
    benchmark::DoNotOptimize(r.raw_data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * bytes);
}

void BM_Add(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n}), b = input({n});
  run(state, 3 * n * 4, [&] { return a + b; });
}

// The same add without the op's allocation: the kernel writes into an output made once, so
// the difference from BM_Add is what a fresh (page-faulting) output costs per call.
void BM_AddKernelOnly(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n}), b = input({n}), out = empty({n});
  run(state, 3 * n * 4, [&] {
    kernels::binary(Device::cpu(), BinaryOp::Add, out, a, b);
    return out;
  });
}

void BM_Mul(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n}), b = input({n});
  run(state, 3 * n * 4, [&] { return a * b; });
}

void BM_Relu(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n});
  run(state, 2 * n * 4, [&] { return relu(a); });
}

void BM_Exp(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n});
  run(state, 2 * n * 4, [&] { return exp(a); });
}

// The same unary op as mdl's kernel ran it before it was vectorised: one libm call per element,
// on the same threads, into a fresh output. The ratio to BM_Exp / BM_Tanh is what vec4.h buys.
template <class F>
void libm_loop(benchmark::State& state, const F& f) {
  const int64_t n = state.range(0);
  Tensor a = input({n});
  run(state, 2 * n * 4, [&] {
    Tensor out = empty({n});
    const float* x = a.data_ptr<float>();
    float* o = out.data_ptr<float>();
    parallel_for(0, n, int64_t(1) << 15, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f(x[i]);
    });
    return out;
  });
}

void BM_ExpLibm(benchmark::State& state) {
  libm_loop(state, [](float x) { return std::exp(x); });
}

void BM_Tanh(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n});
  run(state, 2 * n * 4, [&] { return tanh(a); });
}

void BM_TanhLibm(benchmark::State& state) {
  libm_loop(state, [](float x) { return std::tanh(x); });
}

// GELU (exact) on 1M f32: forward as mdl runs it vs a libm erf loop, and the backward as one fused
// pass vs the formula composed from tensor ops (as autograd ran it before: exp, gelu, div, where,
// mul, add), each into fresh outputs.
void BM_Gelu(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = input({n});
  run(state, 2 * n * 4, [&] { return gelu(a); });
}

void BM_GeluLibm(benchmark::State& state) {
  libm_loop(state, [](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678f)); });
}

void BM_GeluBackwardFused(benchmark::State& state) {
  Tensor x = input({k1M}), g = input({k1M});
  run(state, 3 * k1M * 4, [&] {
    Tensor gx = empty({k1M});
    kernels::gelu_backward(Device::cpu(), gx, g, x, false);
    return gx;
  });
}

void BM_GeluBackwardComposed(benchmark::State& state) {
  Tensor x = input({k1M}), g = input({k1M});
  run(state, 3 * k1M * 4, [&] {
    Tensor phi = exp(x * x * -0.5) * (1.0 / std::sqrt(2.0 * M_PI));
    Tensor Phi = where(eq(x, zeros({})), full_like(x, 0.5), gelu(x) / x);
    return g * (Phi + x * phi);
  });
}

// masked_fill(g, x <= 0, 0): ReLU's backward on a random half-and-half mask, 4M f32 (the size
// of SimpleCNN's first activation). BM_MaskedFillTernary is the loop the kernel had before, a
// plain `c ? v : y` the compiler turns into a branch that mispredicts half the time, on the
// same threads; mdl's kernel selects on the bits instead.
constexpr int64_t k4M = int64_t(1) << 22;

void BM_MaskedFill(benchmark::State& state) {
  Tensor g = input({k4M}), mask = le(input({k4M}), zeros({}));
  run(state, k4M * 9, [&] { return masked_fill(g, mask, 0.0); });
}

void BM_MaskedFillTernary(benchmark::State& state) {
  Tensor g = input({k4M}), mask = le(input({k4M}), zeros({}));
  run(state, k4M * 9, [&] {
    Tensor out = empty({k4M});
    const bool* c = mask.data_ptr<bool>();
    const float* y = g.data_ptr<float>();
    float* o = out.data_ptr<float>();
    parallel_for(0, k4M, int64_t(1) << 15, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = c[i] ? 0.0f : y[i];
    });
    return out;
  });
}

// (4096, 4096) + (4096): the row is read with stride 0 along dim 0.
void BM_BroadcastAdd(benchmark::State& state) {
  Tensor a = input({kSide, kSide}), row = input({kSide});
  run(state, (2 * kSide * kSide + kSide) * 4, [&] { return a + row; });
}

// (4096, 4096).t().contiguous(): reads with a stride of 4096 elements, writes contiguously.
// a.t().contiguous() on 4096 x 4096 f32: in 32 x 32 tiles (mdl's copy) or row by row (the switch off).
void transposed_copy(benchmark::State& state, bool tiled) {
  cpu::set_tiled_transpose(tiled);
  Tensor a = input({kSide, kSide});
  run(state, 2 * kSide * kSide * 4, [&] { return a.t().contiguous(); });
  cpu::set_tiled_transpose(true);
}

void BM_CastF16(benchmark::State& state) {
  Tensor a = input({k16M});
  run(state, k16M * (4 + 2), [&] { return a.to(kF16); });
}

void BM_SumAll(benchmark::State& state) {
  Tensor a = input({k16M});
  run(state, k16M * 4, [&] { return sum(a); });
}

void BM_SumLastDim(benchmark::State& state) {
  Tensor a = input({kSide, kSide});
  run(state, (kSide * kSide + kSide) * 4, [&] { return sum(a, {-1}); });
}

void BM_SumDim0(benchmark::State& state) {
  Tensor a = input({kSide, kSide});
  run(state, (kSide * kSide + kSide) * 4, [&] { return sum(a, {0}); });
}

// softmax over the last dim of (4096, 1024): one read and one write of every element at best.
void BM_Softmax(benchmark::State& state) {
  Tensor a = input({kSide, 1024});
  run(state, 2 * kSide * 1024 * 4, [&] { return softmax(a, -1); });
}

}  // namespace

BENCHMARK(BM_Add)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_AddKernelOnly)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Mul)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Relu)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Exp)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_ExpLibm)->Arg(k1M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Tanh)->Arg(k1M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_TanhLibm)->Arg(k1M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GeluLibm)->Arg(k1M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Gelu)->Arg(k1M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GeluBackwardComposed)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_GeluBackwardFused)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MaskedFillTernary)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MaskedFill)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BroadcastAdd)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CastF16)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SumAll)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SumLastDim)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SumDim0)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Softmax)->Unit(benchmark::kMicrosecond)->UseRealTime();


int main(int argc, char** argv) {
  for (bool tiled : {false, true})
    bench::register_switch("tiled_transpose", tiled, "f32_4096x4096", transposed_copy)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
