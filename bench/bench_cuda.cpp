// GPU microbenchmarks, each an on/off pair in one run: f16 tensor-core GEMM TFLOP/s through mdl's
// matmul against the best size's (cuBLAS's own peak on this card), f32 with and without TF32, the
// linear layer with bias+activation in cuBLASLt's epilogue vs separate kernels, causal f16
// attention in the FlashAttention-2 kernels vs the plain fused kernel (and on mma.sync vs WMMA),
// beside cuDNN's fused attention as a yardstick (bench/cudnn_sdpa.h, CUDA builds),
// vectorised vs strided elementwise bandwidth, the heads-split copy and a bias add over rows, an
// f16 tensor times a number and an f32 + f16 add,
// pinned vs pageable host-to-device copies, the caching allocator vs cudaMalloc/cudaFree, a
// DataLoader epoch with the copy to the GPU on the consumer's stream vs on the loader's side stream
// under a simulated GPU step, a chain of small ops eager vs CUDA Graph replay, batch norm forward
// and backward, a 3x3 conv forward and backward with cuDNN's algorithms measured vs its heuristic
// picks (and in f32 with TF32 vs without), and one training step of SimpleCNN and ResNet-18 at
// batch 128 and GPT (6 x 384, context 256) at batch 32 in f32 vs under autocast f16 with a
// GradScaler, and each replayed as a CUDA Graph (bench/torch_gpu_step.py times the same steps in
// PyTorch). Without a GPU it prints why and exits 0.
// Timing: the kernel benchmarks (GEMMs, elementwise add, copies, linear + activation, attention,
// batch norm, the 3x3 conv) report the GPU's time per call from CUDA events around a batch of
// back-to-back calls (bench/cuda_timing.h, ->UseManualTime()), with the host's wall time per call
// beside it (wall_us).
// The rest (training steps, the DataLoader epoch, host-to-device copies, the allocator, the op
// chain eager vs graph) stay on the host clock: what they compare includes host work by design.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <utility>

#include "bench/cuda_timing.h"
#include "bench/recording_reporter.h"
#include "ops/autocast.h"
#include "amp/grad_scaler.h"
#include "data/loader.h"
#include "data/tensor_dataset.h"
#include "mdl.h"
#include "nn/functional.h"
#include "nn/linear_act.h"
#include "nn/models/models.h"
#include "profiler/session.h"
#include "cuda/api.h"
#include "bench/switch_bench.h"
#include "switches/list/toggles.h"
#ifdef MDL_WITH_CUDA
#include "bench/cudnn_sdpa.h"
#endif

using namespace mdl;

namespace {

const Device kGpu = Device::cuda();

void gemm(benchmark::State& st, DType t, bool tf32) {
  const int64_t n = st.range(0);
  toggles::set_allow_tf32(tf32);
  Tensor a = randn({n, n}, TensorOptions(t, kGpu)), b = randn({n, n}, TensorOptions(t, kGpu));
  Tensor c = matmul(a, b);
  cuda::synchronize();
  bench::run_event_timed(st, [&] { c = matmul(a, b); });
  toggles::set_allow_tf32(false);
  st.counters["TFLOP/s"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(st.iterations()) / 1e12,
                                              benchmark::Counter::kIsRate);
}
void BM_gemm_f16(benchmark::State& st) { gemm(st, kF16, false); }
void BM_gemm_bf16(benchmark::State& st) { gemm(st, kBF16, false); }
BENCHMARK(BM_gemm_f16)->Arg(1024)->Arg(4096)->Arg(8192)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gemm_bf16)->Arg(8192)->UseManualTime()->Unit(benchmark::kMicrosecond);

// out = a + b over 64M floats: all contiguous (16-byte vector loads) vs b read transposed.
void add(benchmark::State& st, bool strided) {
  const int64_t n = 8192;
  Tensor a = randn({n, n}, kGpu), b = randn({n, n}, kGpu);
  Tensor bb = strided ? b.t() : b;
  Tensor c = a + bb;
  cuda::synchronize();
  bench::run_event_timed(st, [&] { c = a + bb; });
  st.counters["GB/s"] = benchmark::Counter(3.0 * 4.0 * double(n * n) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
}
void BM_add_contiguous_vec16(benchmark::State& st) { add(st, false); }
void BM_add_strided(benchmark::State& st) { add(st, true); }
BENCHMARK(BM_add_contiguous_vec16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_add_strided)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The copies a transformer block makes around attention, in f16: (B, T, H, D) -> (B, H, T, D) with
// rows of D = 64 contiguous on both sides (16 bytes per thread along them), and a bias broadcast
// over 8192 rows of 4096. GB/s counts the bytes read and written once.
void BM_copy_heads_split_f16(benchmark::State& st) {
  Tensor x = randn({32, 256, 6, 64}, TensorOptions(kF16, kGpu)), y = x.permute({0, 2, 1, 3}).contiguous();
  cuda::synchronize();
  bench::run_event_timed(st, [&] { y = x.permute({0, 2, 1, 3}).contiguous(); });
  st.counters["GB/s"] = benchmark::Counter(2.0 * 2.0 * double(x.numel()) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
}
void BM_bias_add_rows_f16(benchmark::State& st) {
  Tensor x = randn({8192, 4096}, TensorOptions(kF16, kGpu)), b = randn({4096}, TensorOptions(kF16, kGpu));
  Tensor y = x + b;
  cuda::synchronize();
  bench::run_event_timed(st, [&] { y = x + b; });
  st.counters["GB/s"] = benchmark::Counter(2.0 * 2.0 * double(x.numel()) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
}
BENCHMARK(BM_copy_heads_split_f16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_bias_add_rows_f16)->UseManualTime()->Unit(benchmark::kMicrosecond);

// 16M elements: an f16 tensor times a number (the number in the kernel's arguments) and an f32
// residual plus an f16 branch (the branch read as f16), each one kernel. GB/s counts the bytes read
// and written once.
void BM_mul_scalar_f16_16M(benchmark::State& st) {
  Tensor x = randn({int64_t(1) << 24}, TensorOptions(kF16, kGpu)), y = x * 0.5;
  cuda::synchronize();
  bench::run_event_timed(st, [&] { y = x * 0.5; });
  st.counters["GB/s"] = benchmark::Counter(2.0 * 2.0 * double(x.numel()) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
}
void BM_add_f32_f16_16M(benchmark::State& st) {
  Tensor a = randn({int64_t(1) << 24}, kGpu), h = randn({int64_t(1) << 24}, TensorOptions(kF16, kGpu)), y = a + h;
  cuda::synchronize();
  bench::run_event_timed(st, [&] { y = a + h; });
  st.counters["GB/s"] = benchmark::Counter((4.0 + 2.0 + 4.0) * double(a.numel()) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
}
BENCHMARK(BM_mul_scalar_f16_16M)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_add_f32_f16_16M)->UseManualTime()->Unit(benchmark::kMicrosecond);

// y = act(x @ w^T + b), f16, 8192 tokens, 1024 -> 4096 (a transformer MLP's first layer), forward:
// one cublasLtMatmul with the bias and activation in its epilogue vs the GEMM then a bias-add
// kernel and an activation kernel (each another pass over the 64 MiB output).
void linear_act(benchmark::State& st, Activation act, bool fused) {
  NoGradGuard ng;
  const int64_t M = 8192, K = 1024, N = 4096;
  Tensor x = randn({M, K}, TensorOptions(kF16, kGpu)), w = randn({N, K}, TensorOptions(kF16, kGpu)) * 0.03;
  Tensor b = randn({N}, TensorOptions(kF16, kGpu));
  auto step = [&] {
    if (fused) return nn::functional::linear(x, w, b, act);
    Tensor y = matmul(x, w.t()) + b;
    return act == Activation::Relu ? relu(y) : gelu(y, "tanh");
  };
  Tensor y = step();
  cuda::synchronize();
  bench::run_event_timed(st, [&] { y = step(); });
  st.counters["TFLOP/s"] = benchmark::Counter(2.0 * double(M) * double(N) * double(K) * double(st.iterations()) / 1e12,
                                              benchmark::Counter::kIsRate);
}

// Causal self-attention in f16 or f32 at the GPT step's shape (batch 32, 6 heads, 256 tokens, head
// dim 64): the FlashAttention-2 kernels (cuda/flash_attention.cu) vs the plain fused kernel,
// forward alone and forward + backward (dO given, so the pair times the attention kernels alone).
void attention(benchmark::State& st, DType dtype, bool flash, bool backward) {
  toggles::set_flash_attention(flash);
  const TensorOptions o(dtype, kGpu);
  Tensor q = randn({32, 6, 256, 64}, o), k = randn({32, 6, 256, 64}, o), v = randn({32, 6, 256, 64}, o);
  Tensor go = randn({32, 6, 256, 64}, o);
  auto step = [&] {
    if (!backward) {
      NoGradGuard ng;
      return nn::functional::scaled_dot_product_attention(q, k, v, Tensor(), true);
    }
    // Fresh leaves each step, so their gradients are set, not accumulated by an extra add.
    Tensor a = q.detach().requires_grad_(), b = k.detach().requires_grad_(), c = v.detach().requires_grad_();
    Tensor y = nn::functional::scaled_dot_product_attention(a, b, c, Tensor(), true);
    y.backward(go);
    return y;
  };
  step();
  cuda::synchronize();
  bench::run_event_timed(st, step);
  toggles::set_flash_attention(true);
}

#ifdef MDL_WITH_CUDA
// cuDNN's fused flash attention (bench/cudnn_sdpa.h), forward or forward and backward, on the inputs
// of the attention rows above: the yardstick for mdl's kernels, as OpenBLAS is for the CPU GEMM.
// Skipped, with cuDNN's reason, where cuDNN cannot run a graph.
void cudnn_attention(benchmark::State& st, DType dtype, bool backward) {
  const TensorOptions o(dtype, kGpu);
  Tensor q = randn({32, 6, 256, 64}, o), k = randn({32, 6, 256, 64}, o), v = randn({32, 6, 256, 64}, o);
  Tensor go = randn({32, 6, 256, 64}, o);
  auto step = [&] {
    const bench::CudnnSdpa out = bench::cudnn_sdpa_forward(q, k, v, true, 0.125f);
    if (backward) bench::cudnn_sdpa_backward(q, k, v, out, go, true, 0.125f);
  };
  try {
    std::string why = bench::cudnn_sdpa_unsupported(q, k, true);
    if (why.empty() && backward) why = bench::cudnn_sdpa_backward_unsupported(q, k, true);
    if (!why.empty()) {
      st.SkipWithError(why.c_str());
      return;
    }
    step();
    cuda::synchronize();
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  bench::run_event_timed(st, step);
}
#endif

// 256 MiB host -> device, from pageable vs pinned memory. On the host clock: the pageable side's
// staging through a host buffer is part of what the pair compares.
void h2d(benchmark::State& st, bool pinned) {
  Tensor host = randn({64 << 20});
  if (pinned) host = cuda::pin_memory(host);
  Tensor dev = empty({64 << 20}, kGpu);
  for (auto _ : st) dev.copy_(host);
  st.counters["GB/s"] = benchmark::Counter(double(host.nbytes()) * double(st.iterations()) / 1e9,
                                           benchmark::Counter::kIsRate);
}
void BM_h2d_pageable(benchmark::State& st) { h2d(st, false); }
void BM_h2d_pinned(benchmark::State& st) { h2d(st, true); }
BENCHMARK(BM_h2d_pageable)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_h2d_pinned)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One DataLoader epoch (32 batches of 128 x 3 x 64 x 64 f32, 6 MiB each, pinned, 1 worker,
// prefetch 4) with a simulated GPU step per batch (eight (768, 2048) @ (2048, 2048) f32 matmuls
// on the batch): batches copied by the consumer with .to(cuda) (a copy on mdl's stream that waits for
// the queued compute) vs copied by the loader on its side stream (options.device), overlapping the
// compute of the previous batch. Reports ms per epoch and the share of it spent waiting for data.
// On the host clock: the loader's host threads and the copies' overlap are what the pair measures.
void loader_epoch(benchmark::State& st, bool side_stream) {
  NoGradGuard ng;
  static const data::TensorDataset ds(randn({4096, 3, 64, 64}), randint(0, 10, {4096}, kI64));
  data::DataLoader loader(ds, {.batch_size = 128,
                               .num_workers = 1,
                               .prefetch = 4,
                               .pin_memory = true,
                               .device = side_stream ? kGpu : Device::cpu()});
  Tensor w = randn({2048, 2048}, kGpu) * 0.02;
  auto step = [&](const Tensor& x) {
    Tensor h = x.reshape({-1, 2048});  // (768, 2048): the batch's 6 MiB
    for (int i = 0; i < 8; ++i) h = matmul(h, w);
    return h;
  };
  for (auto& b : loader) step(b.x.to(kGpu));  // warm-up epoch: pinned buffers, allocator, cuBLAS
  cuda::synchronize();
  loader.reset_stats();
  for (auto _ : st) {
    for (auto& b : loader) step(b.x.to(kGpu));
    cuda::synchronize();
  }
  const data::LoaderStats s = loader.stats();
  st.counters["ms/epoch"] = s.epochs ? 1e3 * s.epoch_seconds / double(s.epochs) : 0.0;
  st.counters["wait_%"] = 100.0 * s.wait_fraction();
}

// Allocate and free a 4 MiB tensor: from the cache vs cudaMalloc/cudaFree each time.
void alloc(benchmark::State& st, bool caching) {
  toggles::set_cuda_caching_allocator(caching);
  for (auto _ : st) {
    Tensor t = empty({1 << 20}, kGpu);
    benchmark::DoNotOptimize(t.raw_data());
  }
  toggles::set_cuda_caching_allocator(true);
}

// 30 small elementwise ops (launch-bound: 10 rounds of a multiply, an add and a tanh on 4096 values,
// the numbers passed by value): eager launches vs one graph replay. On the host clock: the pair
// compares the host's launch cost, which events on the stream would only partly see
// (bench/torch_gpu_step.py times PyTorch's eager chain).
Tensor chain(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < 10; ++i) y = tanh(y * 1.01 + 0.1);
  return y;
}
void chain_eager(benchmark::State& st) {
  NoGradGuard ng;
  Tensor x = randn({4096}, kGpu);
  for (auto _ : st) {
    Tensor y = chain(x);
    cuda::synchronize();
  }
}
void chain_graph(benchmark::State& st) {
  NoGradGuard ng;
  Tensor x = randn({4096}, kGpu), out = empty({4096}, kGpu);
  chain(x);
  cuda::Graph g;
  g.capture_begin();
  out.copy_(chain(x));
  g.capture_end();
  for (auto _ : st) {
    g.replay();
    cuda::synchronize();
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One training step: forward, cross-entropy, backward, SGD with momentum; under autocast f16 with
// a GradScaler when amp. Reports images/s (tokens/s for a language model) and host_ms/step. On the host clock, each
// step synchronized: a step's host work (autograd, the optimizer, the scaler's check of the
// gradients) is part of its cost, as in PyTorch's figure for the same step.
void train_step(benchmark::State& st, std::shared_ptr<nn::Module> model, const Shape& input, bool amp,
                int64_t vocab = 0, bool graph = false, bool channels_last = false) {
  manual_seed(0);
  model->to(kGpu);
  if (channels_last) model->to(MemoryFormat::ChannelsLast);
  model->train();
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
  amp::GradScaler scaler({.enabled = amp});
  // Images with a class each, or (vocab > 0) token ids (B, T) with a next-token target per position.
  Tensor x = vocab ? randint(0, vocab, input, TensorOptions(kI64, kGpu)) : randn(input, kGpu);
  Tensor y = vocab ? randint(0, vocab, {input[0] * input[1]}, TensorOptions(kI64, kGpu))
                   : randint(0, 10, {input[0]}, TensorOptions(kI64, kGpu));
  if (channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kF16, amp);
      Tensor out = (*model)(x);
      loss = nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}), y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: cuDNN algorithm search, allocator cache, optimizer state
  cuda::synchronize();
  double host_ms = 0;
  if (graph) {
    // The whole step (forward, loss, backward, the scaler's unscale, skip and update, the SGD
    // update) captured once, then one replay per step.
    try {
      cuda::Graph g;
      g.capture_begin();
      step();
      g.capture_end();
      for (auto _ : st) {
        const auto t0 = std::chrono::steady_clock::now();
        g.replay();
        host_ms += ms_since(t0);
        cuda::synchronize();
      }
    } catch (const std::exception& e) {  // e.g. an op that copies to the host inside the capture
      st.SkipWithError(e.what());
      return;
    }
  } else {
    for (auto _ : st) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      host_ms += ms_since(t0);
      cuda::synchronize();
    }
    // Kernel calls in one more step: every primitive the step calls (each at least one launch).
    profiler::Session prof({.memory = false, .record_modules = false});
    step();
    cuda::synchronize();
    prof.stop();
    const auto& ev = prof.events();
    st.counters["kernels/step"] = double(std::count_if(
        ev.begin(), ev.end(), [](const profiler::Event& e) { return e.kind == profiler::EventKind::Kernel; }));
    st.counters["copies/step"] = double(std::count_if(ev.begin(), ev.end(), [](const profiler::Event& e) {
      return e.kind == profiler::EventKind::Kernel && std::string_view(e.name) == "copy";
    }));
  }
  // The host's share: how long step() (or the replay) took to return, every launch queued but not
  // waited for. Near the wall time, the step is bound by the host's launches, not by the GPU.
  st.counters["host_ms/step"] = host_ms / double(std::max<benchmark::IterationCount>(st.iterations(), 1));
  const double samples = vocab ? double(input[0] * input[1]) : double(input[0]);
  st.counters[vocab ? "tokens/s" : "images/s"] = benchmark::Counter(samples * double(st.iterations()),
                                                                    benchmark::Counter::kIsRate);
}
void BM_simplecnn_step_f32(benchmark::State& st) {
  train_step(st, nn::models::SimpleCNN(1, 10, 28), {128, 1, 28, 28}, false);
}
void BM_simplecnn_step_amp(benchmark::State& st) {
  train_step(st, nn::models::SimpleCNN(1, 10, 28), {128, 1, 28, 28}, true);
}
void BM_resnet18_step_f32(benchmark::State& st) {
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, false);
}
void BM_resnet18_step_amp(benchmark::State& st) { train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true); }
// GPT: 6 layers, width 384, 6 heads, context 256, vocabulary 65, batch 32 x 256 tokens.
void BM_gpt_step_f32(benchmark::State& st) {
  train_step(st, std::make_shared<nn::models::GPT>(), {32, 256}, false, 65);
}
void BM_gpt_step_amp(benchmark::State& st) { train_step(st, std::make_shared<nn::models::GPT>(), {32, 256}, true, 65); }
void BM_simplecnn_step_f32_graph(benchmark::State& st) {
  train_step(st, nn::models::SimpleCNN(1, 10, 28), {128, 1, 28, 28}, false, 0, true);
}
void BM_resnet18_step_f32_graph(benchmark::State& st) {
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, false, 0, true);
}
void BM_gpt_step_f32_graph(benchmark::State& st) {
  train_step(st, std::make_shared<nn::models::GPT>(), {32, 256}, false, 65, true);
}
BENCHMARK(BM_simplecnn_step_f32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_simplecnn_step_amp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_resnet18_step_f32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_resnet18_step_amp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gpt_step_f32)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gpt_step_amp)->UseRealTime()->Unit(benchmark::kMillisecond);
void BM_simplecnn_step_amp_graph(benchmark::State& st) {
  train_step(st, nn::models::SimpleCNN(1, 10, 28), {128, 1, 28, 28}, true, 0, true);
}
void BM_resnet18_step_amp_graph(benchmark::State& st) {
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true, 0, true);
}
void BM_gpt_step_amp_graph(benchmark::State& st) {
  train_step(st, std::make_shared<nn::models::GPT>(), {32, 256}, true, 65, true);
}
BENCHMARK(BM_simplecnn_step_f32_graph)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_resnet18_step_f32_graph)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gpt_step_f32_graph)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_simplecnn_step_amp_graph)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_resnet18_step_amp_graph)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gpt_step_amp_graph)->UseRealTime()->Unit(benchmark::kMillisecond);

// Batch norm in training, forward and backward, on a ResNet-18 stage-1 activation (128, 64, 32, 32)
// in f16 (or bf16) with f32 statistics and affine parameters (bench/torch_gpu_step.py times PyTorch's
// f16 step). GB/s counts the 11 passes over an activation the step makes at least: x twice and y once
// forward (statistics, apply), gy and x twice and gx once backward, and x.grad += gx (as in PyTorch's).
void batch_norm_step(benchmark::State& st, DType t, MemoryFormat format = MemoryFormat::Contiguous) {
  manual_seed(0);
  Tensor x = randn({128, 64, 32, 32}, TensorOptions(t, kGpu)).contiguous(format).requires_grad_();
  Tensor w = ones({64}, kGpu).requires_grad_(), b = zeros({64}, kGpu).requires_grad_();
  Tensor rm = zeros({64}, kGpu), rv = ones({64}, kGpu);
  Tensor gy = randn({128, 64, 32, 32}, TensorOptions(t, kGpu)).contiguous(format);
  auto step = [&] { nn::functional::batch_norm(x, rm, rv, w, b, true).backward(gy); };
  step();
  cuda::synchronize();
  bench::run_event_timed(st, step);
  st.counters["GB/s"] = benchmark::Counter(
      11.0 * double(dtype_size(t)) * double(x.numel()) * double(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
void BM_batch_norm_f16(benchmark::State& st) { batch_norm_step(st, kF16); }
BENCHMARK(BM_batch_norm_f16)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The same step, NCHW or channels-last, with batch norm's statistics passes packed (on) or not (off).
void bn_packed_stats_step(benchmark::State& st, DType t, MemoryFormat format, bool packed) {
  toggles::Scoped flip(toggles::Toggle::batch_norm_packed_stats, packed);
  batch_norm_step(st, t, format);
}

// The same batch norm ending in a ReLU, forward and backward, with `toggle` off or on: with no
// residual, ResNet's conv-bn-relu through BatchNorm2d::forward_relu (fused_bn_relu: the ReLU in
// batch norm's passes, or a batch norm then a relu); with one, a residual block's end,
// relu(batch_norm(x) + identity), through BatchNorm2d::forward_add_relu (fused_bn_add_relu: the sum
// and the ReLU in batch norm's apply pass, or batch norm then add_relu).
void bn_relu_end_step(benchmark::State& st, toggles::Toggle toggle, bool fused, bool residual) {
  toggles::Scoped fuse(toggle, fused);
  manual_seed(0);
  auto bn = std::make_shared<nn::BatchNorm2d>(64);
  bn->to(kGpu);
  const TensorOptions f16(kF16, kGpu);
  Tensor x = randn({128, 64, 32, 32}, f16).requires_grad_();
  Tensor r = residual ? randn({128, 64, 32, 32}, f16).requires_grad_() : Tensor();
  Tensor gy = randn({128, 64, 32, 32}, f16);
  auto step = [&] { (residual ? bn->forward_add_relu(x, r) : bn->forward_relu(x)).backward(gy); };
  step();
  cuda::synchronize();
  bench::run_event_timed(st, step);
}
void bn_relu_step(benchmark::State& st, bool fused) {
  bn_relu_end_step(st, toggles::Toggle::fused_bn_relu, fused, false);
}
void bn_add_relu_step(benchmark::State& st, bool fused) {
  bn_relu_end_step(st, toggles::Toggle::fused_bn_add_relu, fused, true);
}

// A 3x3 conv (64 -> 64 channels, 32x32, batch 128: a ResNet-18 stage-1 layer) forward and
// backward, f16 unless t says otherwise; measured (on) against heuristic (off) cuDNN algorithms. Each
// position makes its own plans. With channels_last, x, w and gy are laid out NHWC (the channels_last
// pair, measured algorithms).
void conv_step(benchmark::State& st, bool measured, bool channels_last = false, DType t = kF16) {
  toggles::set_cudnn_benchmark(measured);
  manual_seed(0);
  const MemoryFormat f = channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  Tensor x = randn({128, 64, 32, 32}, TensorOptions(t, kGpu)).contiguous(f).requires_grad_();
  Tensor w = (randn({64, 64, 3, 3}, kGpu) * 0.05).to(t).contiguous(f).requires_grad_();
  Tensor gy = randn({128, 64, 32, 32}, TensorOptions(t, kGpu)).contiguous(f);
  auto step = [&] { nn::functional::conv2d(x, w, Tensor(), {1, 1}, {1, 1}).backward(gy); };
  step();  // the plans: descriptors and algorithms
  cuda::synchronize();
  bench::run_event_timed(st, step);
  toggles::set_cudnn_benchmark(true);
}

// The ResNet-18 AMP step (BM_resnet18_step_amp) under each position: every conv shape of the model.
void resnet18_step_cudnn(benchmark::State& st, bool measured) {
  toggles::set_cudnn_benchmark(measured);
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true);
  toggles::set_cudnn_benchmark(true);
}

// The ResNet-18 AMP step with its convs free to take nondeterministic cuDNN algorithms (on) or not.
void resnet18_step_nondeterministic(benchmark::State& st, bool on) {
  toggles::Scoped any(toggles::Toggle::cudnn_nondeterministic, on);
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true);
}

// The ResNet-18 AMP step with its 62 parameters updated one launch each (off) or 24 per launch
// (on); the pair's kernels/step counter says how many kernel calls a step makes.
void resnet18_step_multi_tensor(benchmark::State& st, bool on) {
  toggles::set_multi_tensor_step(on);
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true);
  toggles::set_multi_tensor_step(true);
}

// The ResNet-18 AMP step with its blocks ending in add + relu (off) or one add_relu (on).
void resnet18_step_add_relu(benchmark::State& st, bool on) {
  toggles::Scoped bn_fold(toggles::Toggle::fused_bn_add_relu, false);  // so the blocks' ends reach add_relu
  toggles::set_fused_add_relu(on);
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true);
  toggles::set_fused_add_relu(true);
}

// The ResNet-18 AMP step with the model and its input channels-last (Module::to, mdl-train
// --channels-last) against (N, C, H, W).
void resnet18_step_layout(benchmark::State& st, bool channels_last) {
  train_step(st, nn::models::resnet18(10, 3), {128, 3, 32, 32}, true, 0, false, channels_last);
}

// The GPT AMP step (BM_gpt_step_amp) with one switch off and on, for the switches that change it:
// packed_attention (heads read from the packed projection and written in place, or split,
// transposed and joined around the kernel), amp_f32_grads (linear's f32 gradients from the GEMMs
// and the bias sums, or rounded to f16 and converted back through to_dtype nodes),
// amp_weight_cache (the weights' f16 copies kept and rewritten by the optimizer step, or cast by
// every forward) and linear_bias_epilogue (biases in the cuBLASLt epilogue, or a broadcast add and
// a reduction). The pairs' kernels/step counters show the launches saved.
void gpt_step_with(benchmark::State& st, toggles::Toggle toggle, bool on) {
  toggles::Scoped flip(toggle, on);
  train_step(st, std::make_shared<nn::models::GPT>(), {32, 256}, true, 65);
}

}  // namespace

int main(int argc, char** argv) {
  if (!cuda::is_available() && !bench::listing_only(argc, argv)) {
    std::printf("bench_cuda: skipped, %s\n", cuda::compiled() ? "no GPU found" : "built without CUDA (CUDA=0)");
    return 0;
  }
  // The switches' pairs, <switch>/off/<case> then <switch>/on/<case>, after the suite's other benchmarks.
  for (bool on : {false, true})
    bench::register_switch("allow_tf32", on, "gemm", [](benchmark::State& st, bool tf32) { gemm(st, kF32, tf32); })
        ->Arg(4096)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  for (const auto& [name, act] : {std::pair{"f16/relu", Activation::Relu}, std::pair{"f16/gelu", Activation::GeluTanh}})
    for (bool on : {false, true})
      bench::register_switch("fused_linear_act", on, name,
                             [act = act](benchmark::State& st, bool fused) { linear_act(st, act, fused); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  for (DType dtype : {kF16, kF32})
    for (bool backward : {false, true})
      for (bool on : {false, true})
        bench::register_switch(
            "flash_attention", on,
            std::string(dtype_name(dtype)) +
                (backward ? "/causal_b32_h6_t256_d64/fwd_bwd" : "/causal_b32_h6_t256_d64/fwd"),
            [dtype, backward](benchmark::State& st, bool flash) { attention(st, dtype, flash, backward); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
  // f16/bf16 flash attention on mma.sync with every accumulator in registers (on) against WMMA through shared memory.
  for (const auto& [dtype, backward] : {std::pair{kF16, false}, std::pair{kBF16, false}, std::pair{kF16, true}})
    for (bool on : {false, true})
      bench::register_switch("flash_attention_mma", on,
                             std::string(dtype_name(dtype)) +
                                 (backward ? "/causal_b32_h6_t256_d64/fwd_bwd" : "/causal_b32_h6_t256_d64/fwd"),
                             [dtype = dtype, backward = backward](benchmark::State& st, bool mma) {
                               toggles::set_flash_attention_mma(mma);
                               attention(st, dtype, true, backward);
                               toggles::set_flash_attention_mma(true);
                             })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
#ifdef MDL_WITH_CUDA
  // The yardstick: cuDNN's fused attention on the same inputs, beside the mma.sync rows.
  for (const auto& [dtype, backward] : {std::pair{kF16, false}, std::pair{kBF16, false}, std::pair{kF16, true}})
    benchmark::RegisterBenchmark(
        ("cudnn_sdpa/" + std::string(dtype_name(dtype)) +
         (backward ? "/causal_b32_h6_t256_d64/fwd_bwd" : "/causal_b32_h6_t256_d64/fwd"))
            .c_str(),
        [dtype = dtype, backward = backward](benchmark::State& st) { cudnn_attention(st, dtype, backward); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
#endif
  // f32 flash attention on tensor cores with 3xTF32 products (on) against the f32 FMA kernels.
  for (bool backward : {false, true})
    for (bool on : {false, true})
      bench::register_switch("flash_attention_tf32x3", on,
                             backward ? "f32/causal_b32_h6_t256_d64/fwd_bwd" : "f32/causal_b32_h6_t256_d64/fwd",
                             [backward](benchmark::State& st, bool tf32x3) {
                               toggles::Scoped flip(toggles::Toggle::flash_attention_tf32x3, tf32x3);
                               attention(st, kF32, true, backward);
                             })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  // The whole f32 GPT step (BM_gpt_step_f32), whose six attention layers are the kernels' share.
  for (bool on : {false, true})
    bench::register_switch("flash_attention_tf32x3", on, "gpt_step_f32",
                           [](benchmark::State& st, bool tf32x3) {
                             toggles::Scoped flip(toggles::Toggle::flash_attention_tf32x3, tf32x3);
                             train_step(st, std::make_shared<nn::models::GPT>(), {32, 256}, false, 65);
                           })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (bool on : {false, true})
    bench::register_switch("loader_side_stream", on, "epoch", loader_epoch)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
  for (bool on : {false, true})
    bench::register_switch("cuda_caching_allocator", on, "alloc_4MiB", alloc)->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("cuda_graphs", on, "op_chain",
                           [](benchmark::State& st, bool graph) { graph ? chain_graph(st) : chain_eager(st); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("cudnn_nondeterministic", on, "resnet18_step_amp", resnet18_step_nondeterministic)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (bool on : {false, true})
    bench::register_switch("cudnn_nondeterministic", on, "conv3x3_c64_32x32_b128_f16",
                           [](benchmark::State& st, bool any) {
                             toggles::Scoped s(toggles::Toggle::cudnn_nondeterministic, any);
                             conv_step(st, true);
                           })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("cudnn_benchmark", on, "resnet18_step_amp", resnet18_step_cudnn)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (bool on : {false, true})
    bench::register_switch("cudnn_benchmark", on, "conv3x3_c64_32x32_b128_f16",
                           [](benchmark::State& st, bool measured) { conv_step(st, measured); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  // The same conv in f32, on the f32 FMA units (off) against TF32 tensor cores (on).
  for (bool on : {false, true})
    bench::register_switch("cudnn_allow_tf32", on, "conv3x3_c64_32x32_b128_f32",
                           [](benchmark::State& st, bool tf32) {
                             toggles::set_cudnn_allow_tf32(tf32);
                             conv_step(st, true, false, kF32);
                             toggles::set_cudnn_allow_tf32(false);
                           })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("channels_last", on, "conv3x3_c64_32x32_b128_f16",
                           [](benchmark::State& st, bool cl) { conv_step(st, true, cl); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("multi_tensor_step", on, "resnet18_step_amp", resnet18_step_multi_tensor)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (toggles::Toggle t : {toggles::Toggle::packed_attention, toggles::Toggle::amp_f32_grads,
                            toggles::Toggle::amp_weight_cache, toggles::Toggle::linear_bias_epilogue})
    for (bool on : {false, true})
      bench::register_switch(toggles::name(t), on, "gpt_step_amp",
                             [t](benchmark::State& st, bool on) { gpt_step_with(st, t, on); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  for (bool on : {false, true})
    bench::register_switch("fused_add_relu", on, "resnet18_step_amp", resnet18_step_add_relu)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (bool on : {false, true})
    bench::register_switch("fused_bn_relu", on, "bn_relu_f16_128x64x32x32", bn_relu_step)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("fused_bn_add_relu", on, "bn_add_relu_f16_128x64x32x32", bn_add_relu_step)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  struct BnCase {
    const char* name;
    DType t;
    MemoryFormat format;
  };
  for (const BnCase& c : {BnCase{"bn_f16_128x64x32x32", kF16, MemoryFormat::Contiguous},
                          BnCase{"bn_bf16_128x64x32x32", kBF16, MemoryFormat::Contiguous},
                          BnCase{"bn_f16_nhwc_128x64x32x32", kF16, MemoryFormat::ChannelsLast}})
    for (bool on : {false, true})
      bench::register_switch(
          "batch_norm_packed_stats", on, c.name,
          [c](benchmark::State& st, bool packed) { bn_packed_stats_step(st, c.t, c.format, packed); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  for (bool on : {false, true})
    bench::register_switch("channels_last", on, "resnet18_step_amp", resnet18_step_layout)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  if (!bench::run_benchmarks(argc, argv)) return 1;
  return 0;
}
