// The direct conv's operands in f32 or bf16 (autocast bf16 keeps activations in bf16 between
// ops): runs of elements read into floats as the tiles copy them in (exact), and f32 results
// rounded once into a bf16 output, so no f32 copy of a bf16 tensor is ever made around the conv.
#pragma once
#include <cstdint>
#include "cpu/scratch.h"
#include "tensor/tensor.h"

namespace mdl::cpu {

// dst[i] = float(src[i * stride]) for i < n; src of dtype t, f32 or bf16.
void read_floats(const void* src, DType t, int64_t stride, float* dst, int64_t n);
// The values of a contiguous f32 or bf16 tensor as floats: its own data when f32, else widened
// into `store`.
const float* float_values(const Tensor& t, Scratch<float>& store);
// dst (contiguous, f32 or bf16) = src's numel() floats, rounded once for bf16.
void write_floats(const float* src, const Tensor& dst);

}  // namespace mdl::cpu
