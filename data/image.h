// Image files to u8 HWC tensors and back, through stb_image (PNG, JPEG, BMP, GIF, PNM) and
// stb_image_write (PNG). Errors name the file and stb's reason.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::data {

// How many channels decoded images get: as stored, or converted to grayscale or RGB.
enum class Channels : uint8_t { Keep = 0, Gray = 1, Rgb = 3 };

// Decodes an encoded image held in memory; `name` is used in error messages.
Tensor decode_image(const std::vector<uint8_t>& bytes, const std::string& name, Channels channels);
// Reads and decodes a file.
Tensor read_image(const std::string& path, Channels channels);
// Writes a u8 HWC (or HW) tensor with 1 to 4 channels as PNG; throws naming the file on failure.
void write_png(const std::string& path, const Tensor& image);

}  // namespace mdl::data
