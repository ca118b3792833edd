// Memory-bound f32 ops as users call them (each call allocates its output): elementwise at 1M
// and 16M elements (add also without the allocation), a broadcast add, the f16 cast and sums;
// and the switch pairs of the CPU's elementwise kernels, the same op with the switch off
// and on: vector_math (exp, tanh, GELU on 1M f32), avx512_vec_math (tanh, GELU), fused_gelu_backward (GELU forward + backward),
// fused_relu_backward (ReLU forward + backward), fused_add_relu, fused_bn_relu and fused_bn_add_relu
// (a residual block's add + ReLU, batch norm + ReLU, batch norm + residual + ReLU, forward +
// backward), wide_bf16_batch_norm (bf16 batch norm + ReLU), wide_bf16_binary (a bf16 add), branchless_select (masked_fill), tiled_transpose and vector_transpose (a transposed
// copy) and wide_softmax (softmax over rows of 1024). Bytes read plus written per call give the GB/s column.
#include <benchmark/benchmark.h>

#include "bench/recording_reporter.h"
#include "mdl.h"
#include "kernels/core.h"  // kernels::binary, for the allocation-free add
#include "bench/switch_bench.h"
#include "switches/list/toggles.h"

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

// Runs body() with toggle `name` set to `on`, then restores the toggle's previous value.
template <class F>
void with_switch(std::string_view name, bool on, const F& body) {
  const bool was = switches::get(name);
  switches::set(name, on);
  body();
  switches::set(name, was);
}

// op(a) on 1M f32 in [-2, 2): on float vectors, or (vector_math off) one libm call per element,
// each on the same threads into a fresh output.
template <class Op>
void vector_math_pair(benchmark::State& state, bool on, const Op& op) {
  Tensor a = input({k1M});
  with_switch("vector_math", on, [&] { run(state, 2 * k1M * 4, [&] { return op(a); }); });
}

// op(a) on 1M f32 as above, vector_math on: 16 floats at a time, or (avx512_vec_math off) 8.
template <class Op>
void avx512_vec_math_pair(benchmark::State& state, bool on, const Op& op) {
  Tensor a = input({k1M});
  with_switch("avx512_vec_math", on, [&] { run(state, 2 * k1M * 4, [&] { return op(a); }); });
}

// ReLU on 4M f32, forward and backward through autograd: the backward as one pass, or (off) a
// comparison into a bool mask and a masked fill.
void relu_fwd_bwd(benchmark::State& state, bool fused) {
  Tensor x = input({4 * k1M}).requires_grad_(true), g = input({4 * k1M});
  with_switch("fused_relu_backward", fused, [&] {
    run(state, 5 * 4 * k1M * 4, [&] {
      relu(x).backward(g);
      Tensor gx = x.grad();
      x.zero_grad();
      return gx;
    });
  });
}

// A residual block's end on a (32, 64, 32, 32) f32 activation, forward and backward: add_relu in one
// pass, or (off) an add and a relu, the sum written and read once more.
void add_relu_fwd_bwd(benchmark::State& state, bool fused) {
  Tensor a = input({32, 64, 32, 32}).requires_grad_(true), b = input({32, 64, 32, 32}).requires_grad_(true);
  Tensor g = input({32, 64, 32, 32});
  with_switch("fused_add_relu", fused, [&] {
    run(state, 6 * 2 * k1M * 4, [&] {
      (toggles::fused_add_relu() ? add_relu(a, b) : relu(a + b)).backward(g);
      Tensor ga = a.grad();
      a.zero_grad();
      b.zero_grad();
      return ga;
    });
  });
}

// Batch norm (training) then ReLU on a (32, 64, 32, 32) f32 activation, forward and backward through
// BatchNorm2d::forward_relu: one pass each way with the ReLU folded in, or (off) batch norm and a
// relu, the normalised tensor written and read once more in each direction. Bytes: the fused
// passes' (x read twice and y written; gy and x read twice and gx written).
void bn_relu_fwd_bwd(benchmark::State& state, bool fused) {
  const Shape shape{32, 64, 32, 32};
  Tensor x = input(shape).requires_grad_(true), g = input(shape);
  auto bn = std::make_shared<nn::BatchNorm2d>(64);
  with_switch("fused_bn_relu", fused, [&] {
    run(state, 8 * 2 * k1M * 4, [&] {
      bn->forward_relu(x).backward(g);
      Tensor gx = x.grad();
      x.zero_grad();
      bn->zero_grad();
      return gx;
    });
  });
}

// The same batch norm and ReLU on a bf16 activation (ResNet's conv-bn-relu under bf16 autocast), the
// fused op each way: its row loops on the CPU's widest vectors, or (wide_bf16_batch_norm off) through
// float blocks on 4 floats. Bytes: as the f32 pair's, at 2 bytes a value.
void bn_relu_bf16_fwd_bwd(benchmark::State& state, bool wide) {
  const Shape shape{32, 64, 32, 32};
  Tensor x = input(shape).to(kBF16).requires_grad_(true), g = input(shape).to(kBF16);
  auto bn = std::make_shared<nn::BatchNorm2d>(64);
  with_switch("wide_bf16_batch_norm", wide, [&] {
    run(state, 8 * 2 * k1M * 2, [&] {
      bn->forward_relu(x).backward(g);
      Tensor gx = x.grad();
      x.zero_grad();
      bn->zero_grad();
      return gx;
    });
  });
}

// A bf16 add the size of ResNet's first stage (under autocast, gradients meet there at every block's
// fork): widened, added and rounded in the registers, or (wide_bf16_binary off) through float blocks.
void add_bf16(benchmark::State& state, bool wide) {
  const Shape shape{32, 64, 32, 32};
  Tensor a = input(shape).to(kBF16), b = input(shape).to(kBF16);
  with_switch("wide_bf16_binary", wide, [&] { run(state, 3 * 2 * 2 * k1M, [&] { return a + b; }); });
}

// A residual block's end, relu(batch_norm(x) + identity), on a (32, 64, 32, 32) f32 activation,
// forward and backward through BatchNorm2d::forward_add_relu: the sum and the ReLU in batch norm's
// normalising pass, or (off) batch norm then add_relu, the normalised tensor written and read once
// more. Bytes: the fused passes' (x read twice, the residual once, y written; add_relu's backward
// reads gy and y and writes gz; batch norm's reads gz and x twice and writes gx).
void bn_add_relu_fwd_bwd(benchmark::State& state, bool fused) {
  const Shape shape{32, 64, 32, 32};
  Tensor x = input(shape).requires_grad_(true), r = input(shape).requires_grad_(true), g = input(shape);
  auto bn = std::make_shared<nn::BatchNorm2d>(64);
  with_switch("fused_bn_add_relu", fused, [&] {
    run(state, 12 * 2 * k1M * 4, [&] {
      bn->forward_add_relu(x, r).backward(g);
      Tensor gx = x.grad();
      x.zero_grad();
      r.zero_grad();
      bn->zero_grad();
      return gx;
    });
  });
}

// GELU (exact) on 1M f32, forward and backward through autograd: the backward as one fused kernel,
// or (off) composed of ops, each into fresh outputs. The forward is the same on both sides.
void gelu_fwd_bwd(benchmark::State& state, bool fused) {
  Tensor x = input({k1M}).requires_grad_(true), g = input({k1M});
  with_switch("fused_gelu_backward", fused, [&] {
    run(state, 5 * k1M * 4, [&] {
      gelu(x).backward(g);
      Tensor gx = x.grad();
      x.zero_grad();
      return gx;
    });
  });
}

// masked_fill(g, x <= 0, 0): ReLU's backward on a random half-and-half mask, 4M f32 (the size of
// SimpleCNN's first activation): selected on the bits, or (off) by a branch that mispredicts half
// the time.
constexpr int64_t k4M = int64_t(1) << 22;

void masked_fill_pair(benchmark::State& state, bool branchless) {
  Tensor g = input({k4M}), mask = le(input({k4M}), zeros({}));
  with_switch("branchless_select", branchless, [&] { run(state, k4M * 9, [&] { return masked_fill(g, mask, 0.0); }); });
}

// (4096, 4096) + (4096): the row is read with stride 0 along dim 0.
void BM_BroadcastAdd(benchmark::State& state) {
  Tensor a = input({kSide, kSide}), row = input({kSide});
  run(state, (2 * kSide * kSide + kSide) * 4, [&] { return a + row; });
}

// a.t().contiguous() on n x n f32 (reads with a stride of n elements, writes contiguously).
void transposed_copy(benchmark::State& state, int64_t n) {
  Tensor a = input({n, n});
  run(state, 2 * n * n * 4, [&] { return a.t().contiguous(); });
}

// 4096 x 4096 in 32 x 32 tiles copied element by element, or row by row (tiled_transpose off).
void tiled_transpose_pair(benchmark::State& state, bool tiled) {
  with_switch("vector_transpose", false,
              [&] { with_switch("tiled_transpose", tiled, [&] { transposed_copy(state, kSide); }); });
}

// In register blocks and panels, or in the element-by-element tiles (vector_transpose off): at
// 4096 x 4096 (64 MiB each way, streamed out) and 512 x 512 (1 MiB, in cache).
template <int64_t N>
void vector_transpose_pair(benchmark::State& state, bool vector) {
  with_switch("vector_transpose", vector, [&] { transposed_copy(state, N); });
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

// softmax over the last dim of (4096, 1024), its rows on the CPU's widest vectors or (wide_softmax
// off) on 4 floats: one read and one write of every element at best.
void softmax_pair(benchmark::State& state, bool wide) {
  Tensor a = input({kSide, 1024});
  with_switch("wide_softmax", wide, [&] { run(state, 2 * kSide * 1024 * 4, [&] { return softmax(a, -1); }); });
}

}  // namespace

BENCHMARK(BM_Add)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_AddKernelOnly)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Mul)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Relu)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Exp)->Arg(k16M)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_BroadcastAdd)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_CastF16)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SumAll)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SumLastDim)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_SumDim0)->Unit(benchmark::kMicrosecond)->UseRealTime();


int main(int argc, char** argv) {
  // Each pair's off and on side one after the other, so both see the same machine.
  auto pair = [](std::string_view name, std::string_view case_name, void (*fn)(benchmark::State&, bool)) {
    for (bool on : {false, true})
      bench::register_switch(name, on, case_name, fn)->Unit(benchmark::kMicrosecond)->UseRealTime();
  };
  pair("vector_math", "exp_f32_1M",
       [](benchmark::State& s, bool on) { vector_math_pair(s, on, [](const Tensor& a) { return exp(a); }); });
  pair("vector_math", "tanh_f32_1M",
       [](benchmark::State& s, bool on) { vector_math_pair(s, on, [](const Tensor& a) { return tanh(a); }); });
  pair("vector_math", "gelu_f32_1M",
       [](benchmark::State& s, bool on) { vector_math_pair(s, on, [](const Tensor& a) { return gelu(a); }); });
  pair("avx512_vec_math", "tanh_f32_1M",
       [](benchmark::State& s, bool on) { avx512_vec_math_pair(s, on, [](const Tensor& a) { return tanh(a); }); });
  pair("avx512_vec_math", "gelu_f32_1M",
       [](benchmark::State& s, bool on) { avx512_vec_math_pair(s, on, [](const Tensor& a) { return gelu(a); }); });
  pair("fused_gelu_backward", "gelu_f32_1M_fwd_bwd", gelu_fwd_bwd);
  pair("fused_relu_backward", "relu_f32_4M_fwd_bwd", relu_fwd_bwd);
  pair("balanced_threads", "relu_f32_4M_fwd_bwd",
       [](benchmark::State& s, bool on) { with_switch("balanced_threads", on, [&] { relu_fwd_bwd(s, true); }); });
  pair("fused_add_relu", "resblock_f32_32x64x32x32_fwd_bwd", add_relu_fwd_bwd);
  pair("fused_bn_relu", "bn_relu_f32_32x64x32x32_fwd_bwd", bn_relu_fwd_bwd);
  pair("fused_bn_add_relu", "bn_add_relu_f32_32x64x32x32_fwd_bwd", bn_add_relu_fwd_bwd);
  pair("wide_bf16_batch_norm", "bn_relu_bf16_32x64x32x32_fwd_bwd", bn_relu_bf16_fwd_bwd);
  pair("wide_bf16_binary", "add_bf16_32x64x32x32", add_bf16);
  pair("branchless_select", "masked_fill_f32_4M", masked_fill_pair);
  pair("tiled_transpose", "f32_4096x4096", tiled_transpose_pair);
  pair("vector_transpose", "f32_4096x4096", vector_transpose_pair<kSide>);
  pair("vector_transpose", "f32_512x512", vector_transpose_pair<512>);
  pair("wide_softmax", "softmax_f32_4096x1024", softmax_pair);
  if (!bench::run_benchmarks(argc, argv)) return 1;
  return 0;
}
