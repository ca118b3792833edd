// The list of optimization switches: the toggles wired to their backends' setters, the per-run
// options with the flag or API that chooses them, each with its benchmark pair.
#include "switches/switches.h"

#include "cpu/block_cache.h"
#include "cpu/conv.h"
#include "cpu/conv_direct.h"
#include "cpu/copy_options.h"
#include "cpu/float_block.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "cpu/select_bits.h"
#include "cpu/vec_map.h"
#include "cuda/api.h"
#include "io/json.h"
#include "nn/attention_options.h"
#include "nn/container.h"
#include "nn/cross_entropy_options.h"
#include "nn/layer_norm_options.h"
#include "ops/ops.h"
#include "optim/adam_options.h"
#include "optim/optimizer.h"
#include "tensor/error.h"
#include "tensor/float_mode.h"

namespace mdl::switches {

namespace {

std::vector<Switch> make_list() {
  using enum Kind;
  return {
      // Toggles: process-wide, on unless said otherwise.
      {"depthwise_direct",
       toggle,
       "cpu::set_depthwise_direct",
       "on",
       "cpu",
       "conv2d runs convs with one input channel per group (depthwise) in a direct kernel instead of im2col + GEMM.",
       {{"bench_conv", "fwd/depthwise_3x3_c128_32x32_b32", "time", "cpu"},
        {"bench_conv", "bwd/depthwise_3x3_c128_32x32_b32", "time", "cpu"}},
       cpu::set_depthwise_direct,
       cpu::depthwise_direct},
      {"direct_conv",
       toggle,
       "cpu::set_direct_conv",
       "on",
       "cpu",
       "f32 convs with stride 1 and dilation 1 accumulate each output tile in vector registers from shifted rows of the "
       "zero-padded input (forward, input gradient and weight gradient) instead of unfolding the input for a GEMM "
       "(im2col); AVX-512 or AVX2 + FMA loops, following the GEMM kernel choice.",
       {{"bench_conv", "fwd/cnn_conv2_32to64_14x14_b128", "time", "cpu"},
        {"bench_conv", "bwd/cnn_conv2_32to64_14x14_b128", "time", "cpu"},
        {"bench_conv", "fwd/resnet_3x3_64to64_32x32_b32", "time", "cpu"},
        {"bench_conv", "bwd/resnet_3x3_64to64_32x32_b32", "time", "cpu"},
        {"bench_conv", "simplecnn_train_step_b128", "time", "cpu"}},
       cpu::set_direct_conv,
       cpu::direct_conv},
      {"max_pool_vectorized",
       toggle,
       "cpu::set_max_pool_vectorized",
       "on",
       "cpu",
       "The 2x2 / stride 2 f32 max pool runs on 4-float vectors instead of a scalar loop.",
       {{"bench_conv", "b128_c32_28x28", "time", "cpu"}},
       cpu::set_max_pool_vectorized,
       cpu::max_pool_vectorized},
      {"tiled_transpose",
       toggle,
       "cpu::set_tiled_transpose",
       "on",
       "cpu",
       "A transposed matrix is copied in 32x32 tiles instead of row by row.",
       {{"bench_elementwise", "f32_4096x4096", "time", "cpu"}},
       cpu::set_tiled_transpose,
       cpu::tiled_transpose},
      {"vector_math",
       toggle,
       "cpu::set_vector_math",
       "on",
       "cpu",
       "f32 exp, tanh, sigmoid, SiLU and GELU (exact and tanh forms, and GELU's backward) run polynomials on "
       "float vectors instead of one libm call per element.",
       {{"bench_elementwise", "exp_f32_1M", "time", "cpu"},
        {"bench_elementwise", "tanh_f32_1M", "time", "cpu"},
        {"bench_elementwise", "gelu_f32_1M", "time", "cpu"}},
       cpu::set_vector_math,
       cpu::vector_math},
      {"branchless_select",
       toggle,
       "cpu::set_branchless_select",
       "on",
       "cpu",
       "where and masked_fill (ReLU's backward when fused_relu_backward is off, among others) choose between the "
       "values' bits through a mask instead of a ternary the compiler turns into a branch, which a random mask "
       "mispredicts.",
       {{"bench_elementwise", "masked_fill_f32_4M", "time", "cpu"}},
       cpu::set_branchless_select,
       cpu::branchless_select},
      {"avx512_gemm",
       toggle,
       "cpu::set_avx512_gemm",
       "on",
       "cpu",
       "f32 GEMM (matmul, linear layers, im2col convs) runs the AVX-512 12x32 micro-kernel instead of the AVX2 "
       "6x16 one; no effect on a CPU without AVX-512F.",
       {{"bench_gemm", "1024", "GFLOP/s", "cpu"}, {"bench_conv", "simplecnn_train_step_b128", "time", "cpu"}},
       cpu::set_avx512_gemm,
       cpu::avx512_gemm},
      {"bf16_gemm",
       toggle,
       "cpu::set_bf16_gemm",
       "off",
       "cpu",
       "f32 GEMM rounds its operands to bf16 and multiplies them on AMX tiles with f32 accumulation (as "
       "torch.set_float32_matmul_precision(\"medium\")); no effect on a CPU without AMX-BF16.",
       {{"bench_gemm", "1024", "GFLOP/s", "cpu"}, {"bench_conv", "simplecnn_train_step_b128", "time", "cpu"}},
       cpu::set_bf16_gemm,
       cpu::bf16_gemm},
      {"amx_bf16",
       toggle,
       "cpu::set_amx_bf16",
       "on",
       "cpu",
       "bf16 matmuls and convs (autocast bf16) multiply on AMX tiles instead of widening their operands for the "
       "f32 kernel; no effect on a CPU without AMX-BF16.",
       {{"bench_amp", "simplecnn_train_step_b128_autocast_bf16", "time", "cpu"},
        {"bench_amp", "matmul_1024_bf16", "time", "cpu"}},
       cpu::set_amx_bf16,
       cpu::amx_bf16},
      {"pool_before_relu",
       toggle,
       "nn::set_pool_before_relu",
       "on",
       "cpu, cuda",
       "nn::Sequential runs a ReLU followed by a max pool as the pool, then the ReLU (the same result and "
       "gradients), so the ReLU and its backward touch a quarter of the elements.",
       {{"bench_conv", "simplecnn_train_step_b128", "time", "cpu"}},
       nn::set_pool_before_relu,
       nn::pool_before_relu},
      {"fused_gelu_backward",
       toggle,
       "mdl::set_fused_gelu_backward",
       "on",
       "cpu, cuda",
       "GELU's backward (both forms) runs as one kernel instead of its formula composed of about a dozen ops, "
       "each a pass with a temporary.",
       {{"bench_elementwise", "gelu_f32_1M_fwd_bwd", "time", "cpu"}},
       set_fused_gelu_backward,
       fused_gelu_backward},
      {"fused_relu_backward",
       toggle,
       "mdl::set_fused_relu_backward",
       "on",
       "cpu, cuda",
       "ReLU's backward runs as one pass (the gradient where the input is positive, else 0) instead of a "
       "comparison into a bool mask and a masked fill.",
       {{"bench_elementwise", "relu_f32_4M_fwd_bwd", "time", "cpu"}},
       set_fused_relu_backward,
       fused_relu_backward},
      {"fused_add_relu",
       toggle,
       "mdl::set_fused_add_relu",
       "on",
       "cpu, cuda",
       "A residual block ends with relu(a + b) in one pass (BinaryOp::AddRelu, its backward relu's) instead of an "
       "add and a relu, the sum written and read once more.",
       {{"bench_elementwise", "resblock_f32_32x64x32x32_fwd_bwd", "time", "cpu"},
        {"bench_cuda", "resnet18_step_amp", "kernels/step", "cuda"}},
       set_fused_add_relu,
       fused_add_relu},
      {"fused_adamw",
       toggle,
       "optim::set_fused_adamw",
       "on",
       "cpu, cuda",
       "The Adam and AdamW update reads and writes each parameter, gradient and moment once in one kernel "
       "instead of as tensor ops composed in several passes with temporaries.",
       {{"bench_optim", "10000000", "time", "cpu"}},
       optim::set_fused_adamw,
       optim::fused_adamw},
      {"multi_tensor_step",
       toggle,
       "optim::set_multi_tensor_step",
       "on",
       "cpu, cuda",
       "An optimizer step updates up to 24 parameters of one group, and GradScaler unscales up to 24 gradients, "
       "per GPU launch instead of one launch each (on the CPU the same loop either way).",
       {{"bench_cuda", "resnet18_step_amp", "kernels/step", "cuda"},
        {"bench_cuda", "resnet18_step_amp", "time", "cuda"}},
       optim::set_multi_tensor_step,
       optim::multi_tensor_step},
      {"fused_cross_entropy",
       toggle,
       "nn::functional::set_fused_cross_entropy",
       "on",
       "cpu, cuda",
       "Log-softmax and NLL run as one pass over the logits forward and one backward, instead of log_softmax "
       "then nll_loss as separate ops.",
       {{"bench_fusion", "2048x8192_fwd_bwd", "time", "cpu"}},
       nn::functional::set_fused_cross_entropy,
       nn::functional::fused_cross_entropy},
      {"fused_layer_norm",
       toggle,
       "nn::functional::set_fused_layer_norm",
       "on",
       "cpu, cuda",
       "Layer norm computes its statistics and output in two passes, with a fused backward, instead of as "
       "mean/var/rsqrt composed of ops.",
       {{"bench_fusion", "4096x768_fwd_bwd", "time", "cpu"}},
       nn::functional::set_fused_layer_norm,
       nn::functional::fused_layer_norm},
      {"fused_attention",
       toggle,
       "nn::functional::set_fused_attention",
       "on",
       "cpu, cuda",
       "Attention runs per block of query rows in one kernel (scores, softmax, P v), its backward recomputing "
       "the probabilities from the saved logsumexp, instead of as matmul, masked_fill, softmax and matmul ops "
       "that keep (L, S) scores and probabilities for the backward.",
       {{"bench_attention", "fwd_bwd", "time", "cpu"}},
       nn::functional::set_fused_attention,
       nn::functional::fused_attention},
      {"flush_denormal",
       toggle,
       "mdl::set_flush_denormal",
       "on",
       "cpu",
       "CPU kernels read and write values below f32's smallest normal as zero (x86 FTZ and DAZ), avoiding the "
       "slow path x86 cores take for every denormal operand or result.",
       {{"bench_gemm", "denormal_512", "GFLOP/s", "cpu"}},
       set_flush_denormal,
       flush_denormal},
      {"cpu_block_cache",
       toggle,
       "cpu_cache::set_enabled",
       "on (off in sanitizer builds)",
       "cpu",
       "Freed CPU blocks of 1 MiB or more are kept for the next request of that size instead of going back to "
       "the system, so large outputs skip first-touch page faults.",
       {{"bench_cpu_cache", "add_fresh_output_16M", "time", "cpu"}},
       cpu_cache::set_enabled,
       cpu_cache::enabled},
      {"bulk_half_conversion",
       toggle,
       "cpu::set_bulk_half_conversion",
       "on",
       "cpu",
       "CPU kernels convert f16/bf16 values in blocks (F16C for f16) instead of one by one.",
       {{"bench_amp", "simplecnn_train_step_b128_autocast_f16", "time", "cpu"},
        {"bench_amp", "f16_add_b128_c32_28x28", "time", "cpu"}},
       cpu::set_bulk_half_conversion,
       cpu::bulk_half_conversion},
      {"cuda_caching_allocator",
       toggle,
       "cuda::set_caching_enabled",
       "on",
       "cuda",
       "Freed device blocks go back to per-stream free lists and are reused instead of cudaFree/cudaMalloc each time.",
       {{"bench_cuda", "alloc_4MiB", "time", "cuda"}},
       cuda::set_caching_enabled,
       cuda::caching_enabled},
      {"allow_tf32",
       toggle,
       "cuda::set_allow_tf32",
       "off",
       "cuda",
       "f32 matmuls and convs may use TF32 tensor cores (10-bit mantissa products).",
       {{"bench_cuda", "gemm/4096", "TFLOP/s", "cuda"}},
       cuda::set_allow_tf32,
       cuda::allow_tf32},
      {"cudnn_benchmark",
       toggle,
       "cuda::set_cudnn_benchmark",
       "on",
       "cuda",
       "Each convolution shape's cuDNN algorithm is measured once (as cudnn.benchmark) instead of taken from cuDNN's heuristics.",
       {{"bench_cuda", "conv3x3_c64_32x32_b128_f16", "time", "cuda"},
        {"bench_cuda", "resnet18_step_amp", "time", "cuda"}},
       cuda::set_cudnn_benchmark,
       cuda::cudnn_benchmark},
      {"flash_attention",
       toggle,
       "cuda::set_flash_attention",
       "on",
       "cuda",
       "Attention with head dims up to 128 runs FlashAttention-2 (64x64 tiles, online softmax; f16/bf16 on tensor "
       "cores, f32 with exact f32 FMAs) instead of the plain fused kernel (one query row per block, no tensor cores).",
       {{"bench_cuda", "f16/causal_b32_h6_t256_d64/fwd", "time", "cuda"},
        {"bench_cuda", "f16/causal_b32_h6_t256_d64/fwd_bwd", "time", "cuda"},
        {"bench_cuda", "f32/causal_b32_h6_t256_d64/fwd", "time", "cuda"},
        {"bench_cuda", "f32/causal_b32_h6_t256_d64/fwd_bwd", "time", "cuda"}},
       cuda::set_flash_attention,
       cuda::flash_attention},

      // Options: chosen per run.
      {"autocast",
       option,
       "mdl-train --amp f16|bf16; amp::AutocastGuard + amp::GradScaler",
       "none",
       "cpu, cuda",
       "Matmuls and convs run on 16-bit operands with f32 accumulation, the loss scaled against f16 underflow.",
       {{"bench_amp", "simplecnn_train_step_b128", "time", "cpu"},
        {"bench_amp", "simplecnn_train_step_b128_bf16", "time", "cpu"}}},
      {"grad_accumulation",
       option,
       "mdl-train --grad-accum N; optim::accumulate_step",
       "1",
       "cpu, cuda",
       "A batch runs as N micro-batches whose gradients add up before one optimizer step, holding one "
       "micro-batch's activations at a time.",
       {{"bench_accumulate", "simplecnn_step_512", "peak_MB", "cpu"}}},
      {"fused_linear_act",
       option,
       "nn::functional::linear with an activation; nn::LinearAct",
       "fused",
       "cpu, cuda",
       "Bias and activation run in the GEMM's epilogue (cuBLASLt on the GPU) instead of as separate passes.",
       {{"bench_linear", "fwd_bwd/relu", "time", "cpu"}, {"bench_cuda", "f16/relu", "time", "cuda"}}},
      {"separable_conv",
       option,
       "mdl-train --model cnn-separable; nn::SeparableConv2d",
       "off (--model cnn)",
       "cpu, cuda",
       "A 3x3 conv becomes a depthwise 3x3 followed by a pointwise 1x1, with about 8x fewer multiply-adds.",
       {{"bench_conv", "conv_3x3_64to128_32x32_b32_fwd_bwd", "time", "cpu"},
        {"bench_conv", "cnn_train_step_b128", "time", "cpu"}}},
      {"loader_memory_cache",
       option,
       "mdl-train --cache memory; DataLoaderOptions::cache",
       "none",
       "cpu",
       "Decoded samples are kept in memory after the first epoch instead of being decoded again.",
       {{"bench_data", "load_w1_p4", "ms/epoch", "cpu"}}},
      {"loader_file_cache",
       option,
       "mdl-train --cache file; DataLoaderOptions::cache",
       "none",
       "cpu",
       "Decoded samples are written to a file cache that later epochs and runs read instead of decoding.",
       {{"bench_data", "load_w1_p4", "ms/epoch", "cpu"}, {"bench_data", "load_w1_p4_cold", "ms/epoch", "cpu"}}},
      {"loader_workers",
       option,
       "mdl-train --workers N; DataLoaderOptions::num_workers",
       "0 (mdl-train on a GPU: up to 4)",
       "cpu",
       "Batches are decoded by N threads instead of one.",
       {{"bench_data", "load_no_cache_p4", "ms/epoch", "cpu"}}},
      {"prefetch",
       option,
       "mdl-train --prefetch N; DataLoaderOptions::prefetch",
       "0 (mdl-train on a GPU: 8)",
       "cpu",
       "The loader prepares N batches ahead, so loading overlaps the training step.",
       {{"bench_data", "compute_no_cache_w1", "ms/epoch", "cpu"}}},
      {"pin_memory",
       option,
       "mdl-train --pin-memory / --no-pin-memory; DataLoaderOptions::pin_memory",
       "off (mdl-train on a GPU: on)",
       "cuda",
       "Batches are collated into page-locked host memory, which copies to the GPU faster.",
       {{"bench_data", "h2d/16777216", "time", "cuda"}}},
      {"loader_side_stream",
       option,
       "DataLoaderOptions::device (mdl-train --device cuda)",
       "off (device cpu)",
       "cuda",
       "The loader copies each batch to the GPU on a side stream, overlapping the previous step's compute.",
       {{"bench_cuda", "epoch", "time", "cuda"}}},
      {"cuda_graphs",
       option,
       "cuda::Graph capture_begin / capture_end / replay",
       "off",
       "cuda",
       "A captured sequence of kernels is replayed with one launch instead of one launch per op.",
       {{"bench_cuda", "op_chain", "time", "cuda"}}},
      {"channels_last",
       option,
       "mdl-train --channels-last; Module::to(MemoryFormat::ChannelsLast) and Tensor::contiguous(MemoryFormat)",
       "off",
       "cuda",
       "Conv weights and activations lie in NHWC memory, so cuDNN runs f16/bf16 convolutions on tensor cores "
       "without transposing them (the CPU's convs convert, and gain nothing).",
       {{"bench_cuda", "conv3x3_c64_32x32_b128_f16", "time", "cuda"},
        {"bench_cuda", "resnet18_step_amp", "time", "cuda"}}},
  };
}

io::json::Value str(std::string_view s) { return io::json::Value::make_string(std::string(s)); }

}  // namespace

const char* kind_name(Kind k) { return k == Kind::toggle ? "toggle" : "option"; }

const std::vector<Switch>& all() {
  static const std::vector<Switch> list = make_list();
  return list;
}

const Switch& find(std::string_view name) {
  std::string known;
  for (const Switch& s : all()) {
    if (s.name == name) return s;
    known.append(known.empty() ? "" : ", ").append(s.name);
  }
  MDL_FAIL("switches: no switch named '", name, "' (known: ", known, ")");
}

void set(std::string_view name, bool on) {
  const Switch& s = find(name);
  MDL_CHECK(s.kind == Kind::toggle, "switches::set: '", name, "' is a per-run option, set by ", s.set_by);
  s.set(on);
}

bool get(std::string_view name) {
  const Switch& s = find(name);
  MDL_CHECK(s.kind == Kind::toggle, "switches::get: '", name, "' is a per-run option, set by ", s.set_by);
  return s.get();
}

std::string bench_name(std::string_view name, bool on, std::string_view case_name) {
  std::string out(find(name).name);
  out.append(on ? "/on" : "/off");
  if (!case_name.empty()) out.append("/").append(case_name);
  return out;
}

std::string to_json() {
  using io::json::Value;
  Value list = Value::make_array();
  for (const Switch& s : all()) {
    Value benches = Value::make_array();
    for (const BenchPair& b : s.benches) {
      Value pair = Value::make_object();
      pair.add("suite", str(b.suite));
      pair.add("case", str(b.case_name));
      pair.add("off", str(bench_name(s.name, false, b.case_name)));
      pair.add("on", str(bench_name(s.name, true, b.case_name)));
      pair.add("metric", str(b.metric));
      pair.add("device", str(b.device));
      benches.push(std::move(pair));
    }
    Value entry = Value::make_object();
    entry.add("name", str(s.name));
    entry.add("kind", str(kind_name(s.kind)));
    entry.add("set_by", str(s.set_by));
    entry.add("default", str(s.default_value));
    entry.add("device", str(s.device));
    entry.add("changes", str(s.changes));
    entry.add("benches", std::move(benches));
    list.push(std::move(entry));
  }
  return io::json::dump(list);
}

}  // namespace mdl::switches
