// What a kernel call costs, from its arguments: floating-point operations for the ops whose
// arithmetic is known (matmul, the fused linear layer, conv, attention, elementwise ops and
// reductions), the bytes its tensors span, and the operand whose dtype picks its compute ceiling.
#pragma once
#include <cstdint>

#include "tensor/profiler_hook.h"

namespace mdl::profiler::detail {

// FLOPs of kernel `name` called with args[0..count), or -1. Causal attention counts the scores
// a query may see (key j <= query i), not the masked ones.
int64_t kernel_flops(const char* name, const KernelArg* args, int count);
// Bytes of the defined tensor arguments at their logical size (outputs written, inputs read), a
// broadcast (stride 0) dimension counted once, and of the tensors in list arguments. A tensor the
// kernel updates in place (an optimizer step's parameter and state) is read and written: twice.
int64_t kernel_bytes(const char* name, const KernelArg* args, int count);
// The tensor whose dtype sets the call's compute ceiling: a product's first operand (a bf16
// GEMM that writes f32 runs at the bf16 rate), else the first tensor argument; null when none.
const Tensor* compute_operand(const char* name, const KernelArg* args, int count);

}  // namespace mdl::profiler::detail
