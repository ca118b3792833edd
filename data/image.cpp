// stb_image decoding into tensors (format and size checked first) and stb_image_write PNG encoding.
#include "data/image.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/file_util.h"
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

namespace {

// A PNG without its zero-length IDAT chunks (legal, and meaningless): stb copies each IDAT with
// memcpy into a buffer it has not allocated yet when the first one is empty, a null pointer.
// Returns false, leaving `out` alone, when there is none; a malformed chunk list is left to stb.
bool drop_empty_idat(const std::vector<uint8_t>& png, std::vector<uint8_t>& out) {
  auto be32 = [&](size_t at) {
    return uint32_t(png[at]) << 24 | uint32_t(png[at + 1]) << 16 | uint32_t(png[at + 2]) << 8 | uint32_t(png[at + 3]);
  };
  std::vector<std::pair<size_t, size_t>> empty;  // [begin, end) of each empty IDAT chunk
  for (size_t at = 8; at + 8 <= png.size();) {   // a chunk: length, type, data, CRC (possibly cut)
    const uint64_t chunk = 12 + uint64_t(be32(at));
    if (chunk == 12 && std::memcmp(&png[at + 4], "IDAT", 4) == 0) empty.emplace_back(at, std::min(at + 12, png.size()));
    if (chunk > png.size() - at) break;
    at += size_t(chunk);
  }
  if (empty.empty()) return false;
  out.clear();
  size_t from = 0;
  for (const auto& [b, e] : empty) {
    out.insert(out.end(), png.begin() + std::ptrdiff_t(from), png.begin() + std::ptrdiff_t(b));
    from = e;
  }
  out.insert(out.end(), png.begin() + std::ptrdiff_t(from), png.end());
  return true;
}

// Whether a PNM header is one stb reads safely: width, height and maxval of at most 9 digits
// (stb reads them into an int without an overflow check) and a maxval of at most 255 (stb's
// 16-bit PNM path reads past its buffer). Whitespace and comments are skipped as stb skips them.
bool pnm_header_safe(const std::vector<uint8_t>& pnm) {
  size_t at = 2;  // after "P5" or "P6"
  int64_t maxval = 0;
  for (int field = 0; field < 3; ++field) {
    for (;;) {
      while (at < pnm.size() && std::isspace(pnm[at])) ++at;
      if (at >= pnm.size() || pnm[at] != '#') break;
      while (at < pnm.size() && pnm[at] != '\n' && pnm[at] != '\r') ++at;
    }
    size_t digits = 0;
    int64_t value = 0;
    while (at < pnm.size() && std::isdigit(pnm[at]) && digits <= 9) value = value * 10 + (pnm[at++] - '0'), ++digits;
    if (digits > 9) return false;
    maxval = value;
  }
  return maxval <= 255;
}

// Whether every Huffman table stb could read from a JPEG's DHT segments holds at most 256 codes:
// stb 2.27 writes each code's length into a 257-entry array without checking the sum of the 16
// counts. Before the first scan the segments are walked as stb walks them (stb skips bytes up to
// the next 0xFF between them, and each segment it accepts is as long as it says); from the first
// scan on, every 0xFF C4 byte pair is taken for a DHT marker, since stb resynchronises on markers
// inside and after entropy-coded data. Each table is read as stb reads it, with 0 past the end.
bool jpeg_huffman_tables_safe(const std::vector<uint8_t>& jpeg) {
  auto byte_at = [&](size_t at) -> unsigned { return at < jpeg.size() ? jpeg[at] : 0u; };
  auto dht_safe = [&](size_t at) {  // `at`: the segment's length field
    int64_t left = int64_t(byte_at(at) << 8 | byte_at(at + 1)) - 2;
    at += 2;
    while (left > 0 && at < jpeg.size()) {
      const unsigned q = byte_at(at++);
      if (q >> 4 > 1 || (q & 15) > 3) return true;  // stb refuses the table
      int64_t codes = 0;
      for (int i = 0; i < 16; ++i) codes += byte_at(at++);
      if (codes > 256) return false;
      at += size_t(codes);
      left -= 17 + codes;
    }
    return true;
  };
  size_t at = 2;  // after SOI
  for (;;) {      // the segments before the first scan
    while (at < jpeg.size() && jpeg[at] != 0xff) ++at;
    while (at < jpeg.size() && jpeg[at] == 0xff) ++at;
    if (at >= jpeg.size()) return true;
    const unsigned marker = jpeg[at++];
    if (marker == 0xda) break;        // SOS
    if (marker == 0xd9) return true;  // EOI
    if (marker == 0xc4 && !dht_safe(at)) return false;
    const bool has_length = marker != 0x01 && !(marker >= 0xd0 && marker <= 0xd8);
    if (has_length) {
      const size_t length = byte_at(at) << 8 | byte_at(at + 1);
      if (length < 2) break;  // stb refuses it; the rest is scanned anyway
      at += length;
    }
  }
  for (size_t i = at; i < jpeg.size(); ++i) {
    if (jpeg[i] != 0xff) continue;
    size_t m = i + 1;
    while (m < jpeg.size() && jpeg[m] == 0xff) ++m;
    if (m < jpeg.size() && jpeg[m] == 0xc4 && !dht_safe(m + 1)) return false;
  }
  return true;
}

}  // namespace

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

  MDL_CHECK(held != ImageFormat::Pnm || pnm_header_safe(bytes), "decode_image: '", name,
            "' has a PNM header number of more than 9 digits, or a maxval over 255 (16-bit PNM is not read)");
  MDL_CHECK(held != ImageFormat::Jpeg || jpeg_huffman_tables_safe(bytes), "decode_image: '", name,
            "' has a JPEG Huffman table (DHT) of more than 256 codes");
  int w = 0, h = 0, stored = 0;
  MDL_CHECK(stbi_info_from_memory(bytes.data(), int(bytes.size()), &w, &h, &stored), "decode_image: cannot decode '",
            name, "': ", stbi_failure_reason());
  MDL_CHECK(w <= limits.max_side && h <= limits.max_side, "decode_image: '", name, "' declares ", w, " x ", h,
            " pixels, more than ImageLimits.max_side = ", limits.max_side, " per side");
  const int wanted = int(channels);
  std::unique_ptr<uint8_t, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), int(bytes.size()), &w, &h, &stored, wanted), stbi_image_free);
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
  const int h = int(image.size(0)), w = int(image.size(1)), c = image.dim() == 3 ? int(image.size(2)) : 1;
  MDL_CHECK(c >= 1 && c <= 4, "write_png: '", path, "': ", c, " channels (expected 1 to 4)");
  Tensor img = image.contiguous();
  MDL_CHECK(stbi_write_png(path.c_str(), w, h, c, img.raw_data(), w * c) != 0, "write_png: cannot write '", path, "'");
}

}  // namespace mdl::data
