// Memory formats of 4-D tensors, as strides: contiguous (N, C, H, W) rows, or channels-last,
// where the C values of one pixel sit side by side ((N, H, W, C) in memory; PyTorch's
// torch.channels_last). A channels-last tensor keeps its (N, C, H, W) shape; only its strides
// differ, so every kernel that takes strides reads it correctly, and the ones that know the
// format (cuDNN's NHWC convolutions, the elementwise loops) read it without a transpose.
#pragma once
#include <array>
#include <cstdint>

#include "tensor/shape.h"

namespace mdl {

enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast };

const char* memory_format_name(MemoryFormat f);  // "contiguous", "channels_last"

// The dense strides of `shape` in format f; ChannelsLast needs 4 dims.
Shape strides_for(const Shape& shape, MemoryFormat f);

// Whether (shape, strides) is dense in format f; dims of size 1 may have any stride, as in
// Tensor::is_contiguous.
bool has_memory_format(const Shape& shape, const Shape& strides, MemoryFormat f);

// The format a result computed from this geometry keeps: ChannelsLast when it is dense
// channels-last and not also contiguous, else Contiguous. A tensor dense in both (C == 1, or
// H == W == 1) is ChannelsLast when its strides are exactly strides_for(shape, ChannelsLast), as
// PyTorch decides from the strides of the size-1 dims.
MemoryFormat memory_format_of(const Shape& shape, const Shape& strides);

// The order in which an elementwise loop walks the dims of an output of this geometry, outermost
// first: (N, H, W, C) for a channels-last output, so its elements are visited in memory order and
// same-format operands merge into one run; the dims in order otherwise.
std::array<int, 4> channels_last_walk();
bool walks_channels_last(const Shape& shape, const Shape& strides);

}  // namespace mdl
