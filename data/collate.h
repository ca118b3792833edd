// Collation: samples of equal shapes stacked into one batch, x to (B, ...) and y to (B, ...),
// by plain memcpy (no OpenMP inside loader workers), optionally into pinned buffers.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

// What the loader yields; `for (auto& [x, y] : loader)` binds its two members.
struct Batch {
  Tensor x;
  Tensor y;
};

// Throws naming the dataset index of the first sample whose x or y shape or dtype differs from
// the first sample's. `indices` are the dataset indices of `samples`, for the message.
Batch collate(const std::vector<Sample>& samples, const std::vector<int64_t>& indices, bool pinned);

}  // namespace mdl::data
