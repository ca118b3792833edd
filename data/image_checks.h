// Checks of encoded image bytes that stb_image does not make, run before it decodes: headers it
// reads unsafely, and data that is cut short or damaged, which stb would decode from whatever
// follows (zeros, or memory it never wrote) instead of refusing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace mdl::data {

// A PNG without its zero-length IDAT chunks (legal, and meaningless): stb copies each IDAT with
// memcpy into a buffer it has not allocated yet when the first one is empty, a null pointer.
// Returns false, leaving `out` alone, when there is none; a malformed chunk list is left to stb.
bool drop_empty_idat(const std::vector<uint8_t>& png, std::vector<uint8_t>& out);

// A P5/P6 header read as stb reads it: whitespace and comments skipped, then width, height and
// maxval. stb reads each number into an int without an overflow check, so `digits_fit` is false
// when one has more than 9 digits. The samples begin one byte after maxval's digits.
struct PnmHeader {
  int64_t width = 0, height = 0, maxval = 0;
  int channels = 0;  // 1 (P5) or 3 (P6)
  bool digits_fit = true;
  size_t data_offset = 0;
};
PnmHeader read_pnm_header(const std::vector<uint8_t>& pnm);

// Maps a PNM's samples from 0..maxval to 0..255 in place, as PIL does: round(v / maxval * 255),
// ties to even, values past maxval giving 255. Expects 1 <= maxval <= 255.
void rescale_pnm_samples(std::vector<uint8_t>& pnm, const PnmHeader& header);

// Whether every Huffman table stb could read from a JPEG's DHT segments holds at most 256 codes:
// stb 2.27 writes each code's length into a 257-entry array without checking the sum of the 16
// counts.
bool jpeg_huffman_tables_safe(const std::vector<uint8_t>& jpeg);

// Why a w x h image (as stbi_info read it) of format `held` is cut short or damaged, or "" when
// nothing is found: a PNG chunk whose CRC-32 does not match; a BMP without all the uncompressed
// rows its header declares; a PNM without all its samples; a GIF whose first frame's data blocks
// end before their terminator. stb refuses a cut PNG or JPEG itself; within a JPEG's entropy-coded
// data, and inside a GIF's LZW blocks, nothing is checked.
std::string image_damage(const std::vector<uint8_t>& bytes, ImageFormat held, int w, int h);

}  // namespace mdl::data
