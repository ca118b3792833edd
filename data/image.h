// Image files to u8 HWC tensors and back, through stb_image (PNG, JPEG, BMP, GIF: the first frame, PNM: P5 and P6)
// and stb_image_write (PNG). 16-bit PNM is refused. Before decoding, the bytes must be the format the file's extension
// names (a BMP or TGA called .png is refused) and the declared size must be within ImageLimits,
// so a small file cannot make the decoder allocate gigabytes. Data stb would decode from past its
// end or through damage is refused too (data/image_checks.h): a PNG chunk failing its CRC-32, a PNM,
// BMP or GIF cut short, an image of 0 pixels. A PNM maxval below 255 is rescaled to 0..255 as PIL
// does; maxval 0 is refused. Errors name the file and the reason.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::data {

// How many channels decoded images get: as stored, or converted to grayscale or RGB.
enum class Channels : uint8_t { Keep = 0, Gray = 1, Rgb = 3 };

// The largest image decoded; the default admits photographs and refuses decompression bombs.
struct ImageLimits {
  int64_t max_side = 8192;  // pixels, per side; at most 65536
};

// The formats decoded, and which one a name's extension (any case) asks for.
enum class ImageFormat : uint8_t { Unknown, Png, Jpeg, Bmp, Gif, Pnm };
ImageFormat format_from_extension(const std::string& name);
ImageFormat format_from_bytes(const uint8_t* bytes, size_t n);
const char* format_name(ImageFormat f);

// Decodes an encoded image held in memory; `name` (a file name or a label) is used in errors and,
// when it has an image extension, says which format the bytes must be.
Tensor decode_image(const std::vector<uint8_t>& bytes, const std::string& name, Channels channels,
                    const ImageLimits& limits = {});
// Reads and decodes a file.
Tensor read_image(const std::string& path, Channels channels, const ImageLimits& limits = {});
// Writes a u8 HWC (or HW) tensor with 1 to 4 channels and at least one pixel as PNG (at most
// INT_MAX rows of INT_MAX bytes); throws naming the file on failure.
void write_png(const std::string& path, const Tensor& image);

}  // namespace mdl::data
