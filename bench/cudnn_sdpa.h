// cuDNN's fused flash attention, forward and backward, through its backend graph API: the yardstick
// bench_cuda times beside mdl's attention kernels and a cuda: test checks against them, as OpenBLAS
// is for the CPU GEMM. Not part of the library: bench/cudnn_sdpa.cpp is compiled in CUDA builds only
// and linked into bench_cuda and the tests there, so callers include this under MDL_WITH_CUDA.
#pragma once
#include <string>

#include "tensor/tensor.h"

namespace bench {

struct CudnnSdpa {
  mdl::Tensor out;    // (B, H, L, D), q's dtype
  mdl::Tensor stats;  // (B, H, L, 1) f32: each row's logsumexp of the scaled, masked scores
};

struct CudnnSdpaGrads {
  mdl::Tensor dq, dk, dv;  // like q, k and v
};

// Empty when cuDNN can run the forward graph for these shapes and dtype on this GPU; otherwise why
// not ("cuDNN 9.1.0: no engine ... at execution plan"), naming cuDNN's version and the failing step.
// The plan it finds is cached per shape, dtype and causality, and reused by cudnn_sdpa_forward.
std::string cudnn_sdpa_unsupported(const mdl::Tensor& q, const mdl::Tensor& k, bool causal);

// softmax(scale * Q K^T, rows past the diagonal hidden when causal) V on mdl's stream, for Q
// (B, H, L, D) and K, V (B, H, S, D), contiguous, f16 or bf16, on the GPU. Throws mdl::Error with
// cudnn_sdpa_unsupported's reason when cuDNN cannot run it.
CudnnSdpa cudnn_sdpa_forward(const mdl::Tensor& q, const mdl::Tensor& k, const mdl::Tensor& v, bool causal,
                             float scale);

// The same for the backward graph, with each form's failure (bench/cudnn_sdpa.cpp: BackwardForm).
std::string cudnn_sdpa_backward_unsupported(const mdl::Tensor& q, const mdl::Tensor& k, bool causal);

// The form of the backward graph cuDNN planned for these shapes ("D virtual, dQ accumulator
// F16x16-reordered"), empty when it planned none.
std::string cudnn_sdpa_backward_form(const mdl::Tensor& q, const mdl::Tensor& k, bool causal);

// The gradients of cudnn_sdpa_forward's output for grad_out (like q), from its output and stats:
// dQ, dK and dV in q's dtype, on mdl's stream. Throws mdl::Error with cuDNN's reason when it cannot
// run the backward graph.
CudnnSdpaGrads cudnn_sdpa_backward(const mdl::Tensor& q, const mdl::Tensor& k, const mdl::Tensor& v,
                                   const CudnnSdpa& forward, const mdl::Tensor& grad_out, bool causal, float scale);

}  // namespace bench
