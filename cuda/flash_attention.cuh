// FlashAttention-2 (cuda/flash_attention.cu): on tensor cores for f16/bf16, with f32 FMAs for f32,
// behind the contract of kernels/attention.h; cuda/attention.cu hands a call here when
// flash_attention_applies.
#pragma once
#include "tensor/tensor.h"

namespace mdl::cuda {

constexpr int64_t kFlashMaxHeadDim = 128;

// The switch is on (toggles::flash_attention()), q is f16, bf16 or f32, both head dims are <= 128, and
// the kernels' shared memory fits a block of q's device.
bool flash_attention_applies(const Tensor& q, const Tensor& v);

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& mask, bool causal, double scale);
void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              const Tensor& mask, bool causal, double scale);

}  // namespace mdl::cuda
