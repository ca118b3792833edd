// stb_image decoding into tensors (format and size checked first) and stb_image_write PNG encoding.
#include "data/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/file_util.h"
#include "data/image_checks.h"
#include "tensor/error.h"

namespace mdl::data {

ImageFormat format_from_extension(const std::string& name) {
  std::string ext = std::filesystem::path(name).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (ext == ".png") return ImageFormat::Png;
  if (ext == ".jpg" || ext == ".jpeg") return ImageFormat::Jpeg;
  if (ext == ".bmp") return ImageFormat::Bmp;
  if (ext == ".gif") return ImageFormat::Gif;
  if (ext == ".pnm" || ext == ".ppm" || ext == ".pgm") return ImageFormat::Pnm;
  return ImageFormat::Unknown;
}

// The signatures stb's decoders test first; the rest of each header is checked by stb.
ImageFormat format_from_bytes(const uint8_t* b, size_t n) {
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n >= 8 && std::memcmp(b, png, 8) == 0) return ImageFormat::Png;
  if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return ImageFormat::Jpeg;
  if (n >= 2 && b[0] == 'B' && b[1] == 'M') return ImageFormat::Bmp;
  if (n >= 6 && (std::memcmp(b, "GIF87a", 6) == 0 || std::memcmp(b, "GIF89a", 6) == 0)) return ImageFormat::Gif;
  if (n >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) return ImageFormat::Pnm;
  return ImageFormat::Unknown;
}

const char* format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Png: return "PNG";
    case ImageFormat::Jpeg: return "JPEG";
    case ImageFormat::Bmp: return "BMP";
    case ImageFormat::Gif: return "GIF";
    case ImageFormat::Pnm: return "PNM";
    case ImageFormat::Unknown: break;
  }
  return "unknown";
}

Tensor decode_image(const std::vector<uint8_t>& given, const std::string& name, Channels channels,
                    const ImageLimits& limits) {
  std::vector<uint8_t> cleaned;
  const std::vector<uint8_t>& bytes = format_from_bytes(given.data(), given.size()) == ImageFormat::Png &&
                                              drop_empty_idat(given, cleaned)
                                          ? cleaned
                                          : given;
  MDL_CHECK(limits.max_side >= 1 && limits.max_side <= 65536, "decode_image: ImageLimits.max_side = ", limits.max_side,
            " (expected 1 to 65536)");
  MDL_CHECK(!bytes.empty(), "decode_image: '", name, "' is empty");
  MDL_CHECK(bytes.size() <= size_t(INT32_MAX), "decode_image: '", name, "' is too large (", bytes.size(), " bytes)");
  const ImageFormat held = format_from_bytes(bytes.data(), bytes.size());
  MDL_CHECK(held != ImageFormat::Unknown, "decode_image: '", name,
            "' is not a PNG, JPEG, BMP, GIF or PNM (P5/P6) image (its first bytes match none)");
  const ImageFormat named = format_from_extension(name);
  MDL_CHECK(named == ImageFormat::Unknown || named == held, "decode_image: '", name, "' holds ", format_name(held),
            " data, not ", format_name(named), " as its name says");

  const PnmHeader pnm = held == ImageFormat::Pnm ? read_pnm_header(bytes) : PnmHeader{};
  MDL_CHECK(pnm.digits_fit && pnm.maxval <= 255, "decode_image: '", name,
            "' has a PNM header number of more than 9 digits, or a maxval over 255 (16-bit PNM is not read)");
  MDL_CHECK(held != ImageFormat::Pnm || pnm.maxval >= 1, "decode_image: '", name,
            "' has PNM maxval 0 (expected 1 to 255)");
  MDL_CHECK(held != ImageFormat::Jpeg || jpeg_huffman_tables_safe(bytes), "decode_image: '", name,
            "' has a JPEG Huffman table (DHT) of more than 256 codes");
  int w = 0, h = 0, stored = 0;
  MDL_CHECK(stbi_info_from_memory(bytes.data(), int(bytes.size()), &w, &h, &stored), "decode_image: cannot decode '",
            name, "': ", stbi_failure_reason());
  MDL_CHECK(w >= 1 && h >= 1, "decode_image: '", name, "' declares ", w, " x ", h,
            " pixels (an image needs at least one)");
  MDL_CHECK(w <= limits.max_side && h <= limits.max_side, "decode_image: '", name, "' declares ", w, " x ", h,
            " pixels, more than ImageLimits.max_side = ", limits.max_side, " per side");
  const std::string damage = image_damage(bytes, held, w, h);
  MDL_CHECK(damage.empty(), "decode_image: '", name, "' ", damage);

  std::vector<uint8_t> rescaled;  // a PNM whose maxval is not 255, its samples mapped to 0..255
  if (held == ImageFormat::Pnm && pnm.maxval != 255) {
    rescaled = bytes;
    rescale_pnm_samples(rescaled, pnm);
  }
  const std::vector<uint8_t>& source = rescaled.empty() ? bytes : rescaled;
  const int wanted = int(channels);
  std::unique_ptr<uint8_t, void (*)(void*)> pixels(
      stbi_load_from_memory(source.data(), int(source.size()), &w, &h, &stored, wanted), stbi_image_free);
  MDL_CHECK(pixels, "decode_image: cannot decode '", name, "': ", stbi_failure_reason());
  const int c = wanted ? wanted : stored;
  Tensor t = make_tensor({h, w, c}, kU8, Device::cpu());  // (H, W, C)
  std::memcpy(t.raw_data(), pixels.get(), size_t(h) * size_t(w) * size_t(c));
  return t;
}

Tensor read_image(const std::string& path, Channels channels, const ImageLimits& limits) {
  return decode_image(read_file(path, "read_image"), path, channels, limits);
}

void write_png(const std::string& path, const Tensor& image) {
  MDL_CHECK(image.dtype() == kU8 && (image.dim() == 2 || image.dim() == 3), "write_png: '", path,
            "': expected a u8 HW or HWC tensor, got ", dtype_name(image.dtype()), " ", shape_str(image.shape()));
  const int64_t h = image.size(0), w = image.size(1), c = image.dim() == 3 ? image.size(2) : 1;
  MDL_CHECK(c >= 1 && c <= 4, "write_png: '", path, "': ", c, " channels (expected 1 to 4)");
  MDL_CHECK(h >= 1 && w >= 1 && h <= INT_MAX && w * c <= INT_MAX, "write_png: '", path, "': an image of ", h, " x ", w,
            " x ", c, " (expected at least one pixel, at most ", INT_MAX, " rows of at most ", INT_MAX, " bytes)");
  Tensor img = image.contiguous();
  MDL_CHECK(stbi_write_png(path.c_str(), int(w), int(h), int(c), img.raw_data(), int(w * c)) != 0,
            "write_png: cannot write '", path, "'");
}

}  // namespace mdl::data
