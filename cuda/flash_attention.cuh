// FlashAttention-2 on tensor cores for f16/bf16 (cuda/flash_attention.cu), behind the contract of
// kernels/attention.h; cuda/attention.cu hands a call here when flash_attention_applies.
#pragma once
#include "tensor/tensor.h"

namespace mdl::cuda {

constexpr int64_t kFlashMaxHeadDim = 128;

// The switch is on (cuda::flash_attention()), q is f16 or bf16 and both head dims are <= 128.
bool flash_attention_applies(const Tensor& q, const Tensor& v);

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& mask, bool causal, double scale);
void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& mask, bool causal, double scale);

}  // namespace mdl::cuda
