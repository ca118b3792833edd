// Image decoding refuses what it was not built for: bytes of another format than the file's
// extension names (a BMP or TGA called .png), formats whose decoders are not compiled (TGA, PSD),
// images that declare more pixels per side than ImageLimits allows, before any pixel buffer is
// allocated, or no pixel at all, and data stb would decode from past its end or through damage
// (PNM, BMP and GIF cut short, PNG chunks failing their CRC). PNM maxvals below 255 are rescaled
// as PIL does. ImageFolder passes its limits through; write_png refuses what no PNG can hold.
#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include "data/image.h"
#include "data/image_folder.h"
#include "tests/support/data_test_util.h"
#include "tensor/error.h"

using namespace mdl;
using data_test::TempDir;

namespace {

void append(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

std::vector<uint8_t> pixels(int w, int h, int c) {
  std::vector<uint8_t> p(size_t(w * h * c));
  for (size_t i = 0; i < p.size(); ++i) p[i] = uint8_t(i * 5);
  return p;
}

std::vector<uint8_t> encode(const char* format, int w, int h) {
  std::vector<uint8_t> out, px = pixels(w, h, 3);
  const std::string f = format;
  int ok = f == "png"   ? stbi_write_png_to_func(append, &out, w, h, 3, px.data(), w * 3)
           : f == "bmp" ? stbi_write_bmp_to_func(append, &out, w, h, 3, px.data())
           : f == "tga" ? stbi_write_tga_to_func(append, &out, w, h, 3, px.data())
                        : stbi_write_jpg_to_func(append, &out, w, h, 3, px.data(), 90);
  REQUIRE(ok);
  return out;
}

// A PNG signature and an IHDR chunk declaring w x h RGB, and nothing else.
std::vector<uint8_t> png_header(uint32_t w, uint32_t h) {
  std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t v : {w, h})
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
  b.insert(b.end(),
           {8, 2, 0, 0, 0, 0, 0, 0, 0});  // 8-bit RGB, no interlace, then a wrong CRC (the size is refused first)
  return b;
}

std::vector<uint8_t> text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A 1x1 GIF89a: a two-colour palette (16,32,48), (240,224,208), a graphic control extension, then
// the image, whose LZW data is the 2 bytes 0x44 0x01; the trailer 0x3b is the last byte.
const std::vector<uint8_t> kGif = {0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80,
                                   0x00, 0x00, 0x10, 0x20, 0x30, 0xf0, 0xe0, 0xd0, 0x21, 0xf9, 0x04,
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01,
                                   0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b};

std::vector<uint8_t> prefix(const std::vector<uint8_t>& b, size_t n) {
  return {b.begin(), b.begin() + std::ptrdiff_t(n)};
}

}  // namespace

TEST_CASE("decode_image: the bytes must be the format the name says") {
  const auto png = encode("png", 4, 3), bmp = encode("bmp", 4, 3), jpg = encode("jpg", 4, 3);
  CHECK(data::decode_image(png, "a.png", data::Channels::Rgb).shape() == Shape{3, 4, 3});
  CHECK(data::decode_image(bmp, "a.BMP", data::Channels::Rgb).shape() == Shape{3, 4, 3});
  CHECK(data::decode_image(jpg, "a.jpeg", data::Channels::Rgb).shape() == Shape{3, 4, 3});
  CHECK(data::decode_image(bmp, "label without extension", data::Channels::Rgb).shape() == Shape{3, 4, 3});
  CHECK_THROWS_WITH_AS(data::decode_image(bmp, "cat.png", data::Channels::Rgb),
                       doctest::Contains("'cat.png' holds BMP data, not PNG"), Error);
  CHECK_THROWS_WITH_AS(data::decode_image(png, "cat.jpg", data::Channels::Rgb),
                       doctest::Contains("'cat.jpg' holds PNG data, not JPEG"), Error);
  for (const char* name : {"cat.png", "cat.tga", "cat"})
    CHECK_THROWS_WITH_AS(data::decode_image(encode("tga", 4, 3), name, data::Channels::Rgb),
                         doctest::Contains("is not a PNG, JPEG, BMP, GIF or PNM"), Error);
  const std::vector<uint8_t> psd = {'8', 'B', 'P', 'S', 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                    3,   0,   0,   0,   1, 0, 0, 0, 1, 0, 8, 0, 3};
  CHECK_THROWS_WITH_AS(data::decode_image(psd, "cat.psd", data::Channels::Rgb),
                       doctest::Contains("is not a PNG, JPEG, BMP, GIF or PNM"), Error);
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0, ';'};
  CHECK_THROWS_WITH_AS(data::decode_image(gif, "cat.png", data::Channels::Rgb),
                       doctest::Contains("holds GIF data, not PNG"), Error);
}

TEST_CASE("decode_image: a declared size past ImageLimits is refused before decoding") {
  CHECK_THROWS_WITH_AS(data::decode_image(png_header(16384, 16384), "huge.png", data::Channels::Rgb),
                       doctest::Contains("'huge.png' declares 16384 x 16384 pixels, more than ImageLimits.max_side = "
                                         "8192"),
                       Error);
  CHECK_THROWS_WITH_AS(data::decode_image(png_header(1u << 31, 1), "wide.png", data::Channels::Rgb),
                       doctest::Contains("wide.png"), Error);
  const auto png = encode("png", 40, 30);
  CHECK(data::decode_image(png, "a.png", data::Channels::Rgb, {.max_side = 40}).shape() == Shape{30, 40, 3});
  CHECK_THROWS_WITH_AS(data::decode_image(png, "a.png", data::Channels::Rgb, {.max_side = 39}),
                       doctest::Contains("declares 40 x 30 pixels"), Error);
  CHECK_THROWS_WITH_AS(data::decode_image(png, "a.png", data::Channels::Rgb, {.max_side = 0}),
                       doctest::Contains("max_side = 0"), Error);
}

TEST_CASE("ImageFolder: lists only the decoded formats and applies its ImageLimits to every sample") {
  TempDir dir("image_limits");
  data_test::make_image_folder(dir.path, 2, 2, 12, 10, 3);
  data_test::write_bytes((dir.path / "class_0" / "z.tga").string(), encode("tga", 2, 2));
  data::ImageFolder all(dir.path.string());
  CHECK(all.size() == 4);
  CHECK(!data::ImageFolder::is_image_file("x.tga"));
  CHECK(data::ImageFolder::is_image_file("x.PNG"));
  CHECK(data::ImageFolder::is_image_file("x.Gif"));
  data::ImageFolder small(dir.path.string(), data::Channels::Rgb, {.max_side = 11});
  CHECK_THROWS_WITH_AS(small.get(0), doctest::Contains("declares 10 x 12 pixels"), Error);
  CHECK(small.identity() != all.identity());  // a cache of one is not reused for the other
}

TEST_CASE("decode_image: a PNM cut short is refused, never filled with memory it did not write") {
  std::vector<uint8_t> full = text_bytes("P6\n64 64\n255\n");
  const size_t header = full.size();
  full.insert(full.end(), 64 * 64 * 3, 0xab);
  CHECK(data::decode_image(full, "full.ppm", data::Channels::Keep).shape() == Shape{64, 64, 3});
  // stb reads the samples past the end as nothing and returned its buffer as it found it.
  std::vector<uint8_t> cut = prefix(full, header + 10);
  CHECK_THROWS_WITH_AS(data::decode_image(cut, "cut.ppm", data::Channels::Keep),
                       doctest::Contains("'cut.ppm' is cut short: the PNM samples its header declares end at byte "
                                         "12301, the data at byte 23"),
                       Error);
  for (size_t n = 1; n < full.size(); n += n < header + 8 ? 1 : 997) {
    CAPTURE(n);
    CHECK_THROWS_AS(data::decode_image(prefix(full, n), "cut.ppm", data::Channels::Keep), Error);
  }
  CHECK_THROWS_AS(data::decode_image(prefix(full, full.size() - 1), "cut.ppm", data::Channels::Rgb), Error);
  const std::vector<uint8_t> gray = {'P', '5', ' ', '2', ' ', '1', ' ', '2', '5', '5', '\n', 7, 9};
  CHECK(data::decode_image(gray, "g.pgm", data::Channels::Keep).to_vector<uint8_t>() == std::vector<uint8_t>{7, 9});
  CHECK_THROWS_AS(data::decode_image(prefix(gray, 12), "g.pgm", data::Channels::Keep), Error);
}

TEST_CASE("decode_image: an image of no pixels is refused") {
  CHECK_THROWS_WITH_AS(data::decode_image(text_bytes("P6"), "two.ppm", data::Channels::Keep),
                       doctest::Contains("'two.ppm' has PNM maxval 0"), Error);
  CHECK_THROWS_WITH_AS(data::decode_image(text_bytes("P5\n0 0\n255\n"), "zero.pgm", data::Channels::Keep),
                       doctest::Contains("'zero.pgm' declares 0 x 0 pixels (an image needs at least one)"), Error);
  std::vector<uint8_t> bmp = encode("bmp", 4, 1);
  for (int i = 22; i < 26; ++i) bmp[size_t(i)] = 0;  // the height
  CHECK_THROWS_WITH_AS(data::decode_image(bmp, "h0.bmp", data::Channels::Keep),
                       doctest::Contains("'h0.bmp' declares 4 x 0 pixels"), Error);
}

TEST_CASE("decode_image: a BMP or GIF cut short is refused") {
  const std::vector<uint8_t> bmp = encode("bmp", 5, 3);  // 24-bit rows of 15 bytes, padded to 16, from byte 54
  REQUIRE(bmp.size() == 54 + 3 * 16);
  CHECK(data::decode_image(bmp, "a.bmp", data::Channels::Rgb).shape() == Shape{3, 5, 3});
  CHECK_THROWS_WITH_AS(data::decode_image(prefix(bmp, 70), "cut.bmp", data::Channels::Rgb),
                       doctest::Contains("'cut.bmp' is cut short: the BMP pixel rows its header declares end at byte "
                                         "102, the data at byte 70"),
                       Error);
  for (size_t n = 1; n < bmp.size(); ++n) {
    CAPTURE(n);
    CHECK_THROWS_AS(data::decode_image(prefix(bmp, n), "cut.bmp", data::Channels::Rgb), Error);
  }
  CHECK(data::decode_image(kGif, "a.gif", data::Channels::Rgb).to_vector<uint8_t>() ==
        std::vector<uint8_t>{16, 32, 48});
  // All the frame's data is there without the trailer; any shorter cut loses some.
  CHECK(data::decode_image(prefix(kGif, kGif.size() - 1), "a.gif", data::Channels::Rgb).numel() == 3);
  CHECK_THROWS_WITH_AS(data::decode_image(prefix(kGif, kGif.size() - 2), "cut.gif", data::Channels::Rgb),
                       doctest::Contains("'cut.gif' is cut short: its first GIF frame ends before"), Error);
  for (size_t n = 1; n + 1 < kGif.size(); ++n) {
    CAPTURE(n);
    CHECK_THROWS_AS(data::decode_image(prefix(kGif, n), "cut.gif", data::Channels::Rgb), Error);
  }
}

TEST_CASE("decode_image: a PNM maxval below 255 is rescaled to 0..255 as PIL rounds it; maxval 0 is refused") {
  auto pgm = [](int maxval, std::vector<uint8_t> samples) {
    std::vector<uint8_t> b = text_bytes("P5\n" + std::to_string(samples.size()) + " 1\n" + std::to_string(maxval) +
                                        "\n");
    b.insert(b.end(), samples.begin(), samples.end());
    return b;
  };
  // PIL: min(255, round(v / maxval * 255)), ties to even (42.5 -> 42, 76.5 -> 76, 127.5 -> 128).
  CHECK(data::decode_image(pgm(100, {100, 50, 0, 150}), "a.pgm", data::Channels::Keep).to_vector<uint8_t>() ==
        std::vector<uint8_t>{255, 128, 0, 255});
  CHECK(data::decode_image(pgm(6, {1, 3, 6}), "b.pgm", data::Channels::Keep).to_vector<uint8_t>() ==
        std::vector<uint8_t>{42, 128, 255});
  CHECK(data::decode_image(pgm(10, {3}), "c.pgm", data::Channels::Keep).to_vector<uint8_t>() ==
        std::vector<uint8_t>{76});
  CHECK(data::decode_image(pgm(255, {3, 200}), "d.pgm", data::Channels::Keep).to_vector<uint8_t>() ==
        std::vector<uint8_t>{3, 200});
  // Rescaled before any channel conversion.
  CHECK(data::decode_image(pgm(1, {1, 0}), "e.pgm", data::Channels::Rgb).to_vector<uint8_t>() ==
        std::vector<uint8_t>{255, 255, 255, 0, 0, 0});
  CHECK_THROWS_WITH_AS(data::decode_image(pgm(0, {0, 0}), "z.pgm", data::Channels::Keep),
                       doctest::Contains("'z.pgm' has PNM maxval 0 (expected 1 to 255)"), Error);
}

TEST_CASE("decode_image: a PNG chunk whose CRC-32 does not match is refused, naming the chunk") {
  const std::vector<uint8_t> png = encode("png", 4, 3);
  const Tensor good = data::decode_image(png, "a.png", data::Channels::Rgb);
  // The chunks: IHDR at byte 8 (25 bytes), then IDAT at byte 33.
  REQUIRE(std::string(png.begin() + 37, png.begin() + 41) == "IDAT");
  const size_t idat_length = size_t(png[33]) << 24 | size_t(png[34]) << 16 | size_t(png[35]) << 8 | png[36];
  std::vector<uint8_t> bad_crc = png;
  bad_crc[41 + idat_length] ^= 1;  // the first byte of IDAT's CRC: the image data is intact
  CHECK_THROWS_WITH_AS(data::decode_image(bad_crc, "crc.png", data::Channels::Rgb),
                       doctest::Contains("'crc.png' has a damaged PNG chunk: 'IDAT' at byte 33 fails its CRC-32 check"),
                       Error);
  std::vector<uint8_t> bad_ihdr = png;
  bad_ihdr[28] ^= 1;  // IHDR's last data byte: interlaced
  CHECK_THROWS_WITH_AS(data::decode_image(bad_ihdr, "ihdr.png", data::Channels::Rgb),
                       doctest::Contains("'IHDR' at byte 8 fails its CRC-32 check"), Error);
  // Bytes after IEND, which stb does not read, are not taken for chunks.
  std::vector<uint8_t> trailing = png;
  trailing.insert(trailing.end(), 16, 0);
  CHECK(data::decode_image(trailing, "a.png", data::Channels::Rgb).to_vector<uint8_t>() == good.to_vector<uint8_t>());
}

TEST_CASE("write_png: an image of no pixels, or too large for a PNG, is refused naming the file") {
  TempDir dir("write_png");
  CHECK_THROWS_WITH_AS(data::write_png(dir.file("e.png"), make_tensor({0, 4, 3}, kU8, Device::cpu())),
                       doctest::Contains(("write_png: '" + dir.file("e.png") + "': an image of 0 x 4 x 3").c_str()),
                       Error);
  CHECK_THROWS_WITH_AS(data::write_png(dir.file("w.png"), make_tensor({2, 0}, kU8, Device::cpu())),
                       doctest::Contains("an image of 2 x 0 x 1"), Error);
  // 2^31 columns of one byte, as a broadcast view of one pixel.
  const Tensor wide = make_tensor({1, 1, 1}, kU8, Device::cpu()).expand({1, int64_t(1) << 31, 1});
  CHECK_THROWS_WITH_AS(data::write_png(dir.file("big.png"), wide), doctest::Contains("an image of 1 x 2147483648 x 1"),
                       Error);
  CHECK(!std::filesystem::exists(dir.file("e.png")));
  data::write_png(dir.file("ok.png"), make_tensor({1, 1, 1}, kU8, Device::cpu()));
  CHECK(data::read_image(dir.file("ok.png"), data::Channels::Keep).shape() == Shape{1, 1, 1});
}
