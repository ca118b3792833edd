// The kernel contract for dropout: a counter-based mask (Philox, kernels/philox.h) that depends on
// (seed, offset) alone, so forward and backward agree on every backend, and the masked scale.
// The caller is nn/functional_norm.cpp.
#pragma once
#include <cstdint>

#include "kernels/core.h"

namespace mdl::kernels {

// mask (Bool, contiguous): element i is kept when uniform draw i >= p, the draws being the
// Philox words of (seed, offset + i / 4), word i % 4: the mask depends on (seed, offset) only.
using DropoutMaskFn = void(const Tensor& mask, double p, uint64_t seed, uint64_t offset);
// out (contiguous) = mask ? in * scale : 0; in and mask of out's shape, any strides.
using MaskedScaleFn = void(const Tensor& out, const Tensor& in, const Tensor& mask, double scale);

#define MDL_DROPOUT_KERNELS(X)                    \
  X(dropout_mask, DropoutMaskFn, "dropout", BOTH) \
  X(masked_scale, MaskedScaleFn, "dropout_scale", BOTH)
MDL_DROPOUT_KERNELS(MDL_DEFINE_STUB)

}  // namespace mdl::kernels
