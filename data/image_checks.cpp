// The checks stb_image skips: chunk CRCs, cut PNM, BMP and GIF data, and headers stb reads unsafely.
#include "data/image_checks.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

namespace mdl::data {

namespace {

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | uint32_t(b[at + 3]);
}
uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 | uint32_t(b[at + 3]) << 24;
}
uint32_t le16(const std::vector<uint8_t>& b, size_t at) { return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8; }

std::string cut_short(const char* what, uint64_t needed, size_t held) {
  return std::string("is cut short: ") + what + " end at byte " + std::to_string(needed) + ", the data at byte " +
         std::to_string(held);
}

// Each complete chunk's CRC-32 (over its type and data) against the one stored after it, up to
// IEND (stb reads nothing after it).
std::string png_damage(const std::vector<uint8_t>& png) {
  for (size_t at = 8; at + 8 <= png.size();) {
    const uint64_t chunk = 12 + uint64_t(be32(png, at));
    if (chunk > png.size() - at) break;  // cut: stb refuses it
    const size_t data_end = at + size_t(chunk) - 4;
    const uint32_t crc = uint32_t(crc32(0, png.data() + at + 4, uInt(data_end - at - 4)));
    if (crc != be32(png, data_end))
      return "has a damaged PNG chunk: '" +
             std::string(png.begin() + std::ptrdiff_t(at + 4), png.begin() + std::ptrdiff_t(at + 8)) + "' at byte " +
             std::to_string(at) + " fails its CRC-32 check";
    if (std::memcmp(&png[at + 4], "IEND", 4) == 0) break;
    at += size_t(chunk);
  }
  return "";
}

std::string pnm_damage(const std::vector<uint8_t>& pnm) {
  const PnmHeader h = read_pnm_header(pnm);
  const uint64_t end = uint64_t(h.data_offset) + uint64_t(h.width * h.height * h.channels);
  return end <= pnm.size() ? "" : cut_short("the PNM samples its header declares", end, pnm.size());
}

// The pixel rows start at bfOffBits (stb skips or insists on reaching it); each row is padded to
// 4 bytes. stb refuses compressed BMPs, so every one it reads has all its rows stored.
std::string bmp_damage(const std::vector<uint8_t>& bmp, int w, int h) {
  if (bmp.size() < 30) return cut_short("the BMP headers", 30, bmp.size());
  const uint32_t header_size = le32(bmp, 14);
  const uint32_t bpp = header_size == 12 ? le16(bmp, 24) : le16(bmp, 28);
  const uint64_t stride = (uint64_t(w) * bpp + 31) / 32 * 4;
  const uint64_t end = uint64_t(le32(bmp, 10)) + stride * uint64_t(h);
  return end <= bmp.size() ? "" : cut_short("the BMP pixel rows its header declares", end, bmp.size());
}

// Walks a GIF's blocks up to the end of its first image's data (the frame stb decodes): every
// sub-block must be whole and the terminating zero-length block present.
std::string gif_damage(const std::vector<uint8_t>& gif) {
  const std::string cut = "is cut short: its first GIF frame ends before its data's terminating block";
  auto after_color_table = [](size_t at, uint8_t flags) {
    return flags & 0x80 ? at + 3 * (size_t(2) << (flags & 7)) : at;
  };
  auto after_sub_blocks = [&](size_t at) -> size_t {  // 0: the data ends first
    while (at < gif.size()) {
      const size_t length = gif[at++];
      if (length == 0) return at;
      at += length;
    }
    return 0;
  };
  if (gif.size() < 13) return cut;
  size_t at = after_color_table(13, gif[10]);
  while (at < gif.size()) {
    const uint8_t block = gif[at++];
    if (block == 0x21) {  // an extension: its label, then sub-blocks
      at = after_sub_blocks(at + 1);
      if (at == 0) return cut;
    } else if (block == 0x2c) {  // an image: descriptor, local colours, LZW code size, sub-blocks
      if (at + 9 > gif.size()) return cut;
      return after_sub_blocks(after_color_table(at + 9, gif[at + 8]) + 1) == 0 ? cut : "";
    } else {
      return "";  // the trailer, or a block stb judges
    }
  }
  return cut;
}

}  // namespace

bool drop_empty_idat(const std::vector<uint8_t>& png, std::vector<uint8_t>& out) {
  std::vector<std::pair<size_t, size_t>> empty;  // [begin, end) of each empty IDAT chunk
  for (size_t at = 8; at + 8 <= png.size();) {   // a chunk: length, type, data, CRC (possibly cut)
    const uint64_t chunk = 12 + uint64_t(be32(png, at));
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

PnmHeader read_pnm_header(const std::vector<uint8_t>& pnm) {
  PnmHeader h;
  h.channels = pnm.size() >= 2 && pnm[1] == '6' ? 3 : 1;
  size_t at = 2;  // after "P5" or "P6"
  for (int64_t* field : {&h.width, &h.height, &h.maxval}) {
    for (;;) {
      while (at < pnm.size() && std::isspace(pnm[at])) ++at;
      if (at >= pnm.size() || pnm[at] != '#') break;
      while (at < pnm.size() && pnm[at] != '\n' && pnm[at] != '\r') ++at;
    }
    size_t digits = 0;
    while (at < pnm.size() && std::isdigit(pnm[at]) && digits <= 9) *field = *field * 10 + (pnm[at++] - '0'), ++digits;
    if (digits > 9) h.digits_fit = false;
  }
  h.data_offset = at + 1;
  return h;
}

void rescale_pnm_samples(std::vector<uint8_t>& pnm, const PnmHeader& header) {
  uint8_t map[256];
  for (int v = 0; v < 256; ++v)
    map[v] = uint8_t(std::min(255.0, std::nearbyint(double(v) / double(header.maxval) * 255.0)));
  for (size_t i = std::min(header.data_offset, pnm.size()); i < pnm.size(); ++i) pnm[i] = map[pnm[i]];
}

// Before the first scan the segments are walked as stb walks them (stb skips bytes up to the next
// 0xFF between them, and each segment it accepts is as long as it says); from the first scan on,
// every 0xFF C4 byte pair is taken for a DHT marker, since stb resynchronises on markers inside and
// after entropy-coded data. Each table is read as stb reads it, with 0 past the end.
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

std::string image_damage(const std::vector<uint8_t>& bytes, ImageFormat held, int w, int h) {
  switch (held) {
    case ImageFormat::Png: return png_damage(bytes);
    case ImageFormat::Pnm: return pnm_damage(bytes);
    case ImageFormat::Bmp: return bmp_damage(bytes, w, h);
    case ImageFormat::Gif: return gif_damage(bytes);
    case ImageFormat::Jpeg:
    case ImageFormat::Unknown: break;
  }
  return "";
}

}  // namespace mdl::data
