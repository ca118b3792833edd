// What a kernel call costs, from its tensor arguments: floating-point operations for the ops
// whose arithmetic is known (matmul, the fused linear layer, conv, attention, elementwise ops and
// reductions), and the bytes its tensors span.
#pragma once
#include <cstdint>

namespace mdl {
class Tensor;
}

namespace mdl::profiler::detail {

// FLOPs of kernel `name` called with tensors[0..count) (null: not a Tensor argument), or -1.
int64_t kernel_flops(const char* name, const Tensor* const* tensors, int count);
// Bytes of the defined tensor arguments at their logical size (outputs written, inputs read), a
// broadcast (stride 0) dimension counted once.
int64_t kernel_bytes(const Tensor* const* tensors, int count);

}  // namespace mdl::profiler::detail
