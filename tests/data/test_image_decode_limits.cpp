// Image decoding refuses what it was not built for: bytes of another format than the file's
// extension names (a BMP or TGA called .png), formats whose decoders are not compiled (TGA, PSD),
// and images that declare more pixels per side than ImageLimits allows, before any pixel buffer
// is allocated. ImageFolder passes its limits through.
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
  b.insert(b.end(), {8, 2, 0, 0, 0, 0, 0, 0, 0});  // 8-bit RGB, no interlace, then a CRC stb does not check
  return b;
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
