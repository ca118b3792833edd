// safetensors checkpoints, the format PyTorch, JAX and Hugging Face read: u64 little-endian
// header length, a JSON header (dtype, shape, data_offsets per tensor, optional __metadata__)
// padded with spaces to a multiple of 8, then the tensors' bytes packed without holes.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::io {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// Writes atomically: a temporary file beside `path`, flushed, then renamed over it. The data is laid
// out widest elements first (the reference writer's order), each tensor aligned to its element size.
// Supports f32, f16, bf16, f64, i32, i64, u8, bool; tensors may live on any device and have any strides.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

// The value metadata records for key, or null.
const std::string* find_metadata(const Metadata& metadata, std::string_view key);

struct SafetensorsContents {
  NamedTensors tensors;  // in the header's order: as they were saved, for a file mdl wrote
  Metadata metadata;
};
// Validates everything (header length bound, JSON, dtype names, shapes, offsets inside the file,
// contiguous without holes or overlaps, byte counts) and throws mdl::Error naming the file and the fault.
SafetensorsContents read_safetensors(const std::string& path);
NamedTensors load_safetensors(const std::string& path);

}  // namespace mdl::io
