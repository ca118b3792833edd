// Strides and format tests for the two memory formats of 4-D tensors.
#include "tensor/memory_format.h"

#include <algorithm>

#include "tensor/error.h"

namespace mdl {

namespace {
// Dims from innermost to outermost in memory.
constexpr std::array<int, 4> kChannelsLastInnerFirst{1, 3, 2, 0};
}  // namespace

const char* memory_format_name(MemoryFormat f) {
  return f == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous";
}

Shape strides_for(const Shape& shape, MemoryFormat f) {
  if (f == MemoryFormat::Contiguous) return contiguous_strides(shape);
  MDL_CHECK(shape.size() == 4, "channels_last: expected a 4-D shape (N, C, H, W), got ", shape_str(shape));
  Shape strides(4);
  int64_t expected = 1;
  for (int d : kChannelsLastInnerFirst) {
    strides[size_t(d)] = expected;
    expected *= std::max<int64_t>(shape[size_t(d)], 1);
  }
  return strides;
}

bool has_memory_format(const Shape& shape, const Shape& strides, MemoryFormat f) {
  if (shape_numel(shape) == 0) return f == MemoryFormat::Contiguous || shape.size() == 4;
  if (f == MemoryFormat::ChannelsLast && shape.size() != 4) return false;
  int64_t expected = 1;
  auto matches = [&](size_t d) {
    if (shape[d] == 1) return true;
    if (strides[d] != expected) return false;
    expected *= shape[d];
    return true;
  };
  if (f == MemoryFormat::ChannelsLast) {
    for (int d : kChannelsLastInnerFirst)
      if (!matches(size_t(d))) return false;
    return true;
  }
  for (size_t d = shape.size(); d-- > 0;)
    if (!matches(d)) return false;
  return true;
}

MemoryFormat memory_format_of(const Shape& shape, const Shape& strides) {
  if (shape.size() != 4 || shape_numel(shape) == 0 || !has_memory_format(shape, strides, MemoryFormat::ChannelsLast))
    return MemoryFormat::Contiguous;
  if (!has_memory_format(shape, strides, MemoryFormat::Contiguous)) return MemoryFormat::ChannelsLast;
  // Dense in both (one channel, or one pixel): the strides of the size-1 dims tell which it was made as.
  return strides == strides_for(shape, MemoryFormat::ChannelsLast) ? MemoryFormat::ChannelsLast
                                                                   : MemoryFormat::Contiguous;
}

std::array<int, 4> channels_last_walk() { return {0, 2, 3, 1}; }

bool walks_channels_last(const Shape& shape, const Shape& strides) {
  return memory_format_of(shape, strides) == MemoryFormat::ChannelsLast;
}

}  // namespace mdl
