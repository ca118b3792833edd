// Inputs the libFuzzer harnesses (fuzz/) found, replayed: each must now raise an mdl::Error, not
// undefined behaviour. The bytes are the harness's input, minimized, and split as that harness splits it.
#include <doctest/doctest.h>
#include <stb/stb_image_write.h>

#include "data/idx.h"
#include "data/image.h"
#include "tests/support/data_test_util.h"
#include "tensor/error.h"

using data_test::TempDir;
using data_test::write_bytes;

// fuzz_idx: labels [3] = 0,1,2 and images of dims [3, 0, 0x08010000] with no payload. Every sample held
// zero pixels, and get() copied from the empty pixel buffer's null pointer (UBSan: memcpy nonnull).
TEST_CASE("fuzz regression: IDX images with a zero height are refused") {
  TempDir dir("fuzz_idx");
  const std::vector<uint8_t> labels = {0x00, 0x00, 0x08, 0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x01, 0x02};
  const std::vector<uint8_t> images = {0x00, 0x00, 0x08, 0x03, 0x00, 0x00, 0x00, 0x03,
                                       0x00, 0x00, 0x00, 0x00, 0x08, 0x01, 0x00, 0x00};
  write_bytes(dir.file("labels"), labels);
  write_bytes(dir.file("images"), images);
  CHECK_THROWS_WITH_AS(mdl::data::IdxDataset(dir.file("images"), dir.file("labels")),
                       doctest::Contains("an image needs at least one pixel"), mdl::Error);
}

// fuzz_image: a 3 x 2 RGB PNG whose first IDAT chunk is empty (an unknown chunk of length 2 sits
// before it). stb_image copied the empty chunk into its not yet allocated buffer: memcpy from a
// null pointer (UBSan: nonnull). decode_image drops empty IDAT chunks before stb sees the bytes.
TEST_CASE("fuzz regression: a PNG with an empty IDAT chunk decodes without undefined behaviour") {
  const std::vector<uint8_t> png = {
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
      0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x49, 0x44, 0x41, 0x54, 0x78, 0x63, 0x9c, 0x50, 0x60, 0xf5, 0xca,
      0x9f, 0xb2, 0xf3, 0x1e, 0x03, 0xb3, 0x06, 0x9c, 0x05, 0x00, 0x3c, 0xcc, 0x06, 0x69, 0x04, 0x94,
      0x5f, 0xbc, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
  };
  try {
    mdl::data::decode_image(png, "fuzz.png", mdl::data::Channels::Keep);
  } catch (const mdl::Error&) {}
  // An empty IDAT between two halves of a valid image's data changes nothing.
  std::vector<uint8_t> good;
  mdl::Tensor img = mdl::make_tensor({2, 3, 3}, mdl::kU8, mdl::Device::cpu());
  for (int i = 0; i < 18; ++i) img.data_ptr<uint8_t>()[i] = uint8_t(i * 13);
  TempDir dir("fuzz_png");
  mdl::data::write_png(dir.file("a.png"), img);
  good = data_test::read_bytes(dir.file("a.png"));
  const std::vector<uint8_t> empty_idat = {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xaf, 0x06, 0x1e};
  std::vector<uint8_t> with_empty;
  for (size_t i = 0; i < good.size(); ++i) {
    if (i == 33)  // after the signature and IHDR
      for (uint8_t b : empty_idat) with_empty.push_back(b);
    with_empty.push_back(good[i]);
  }
  CHECK(mdl::data::decode_image(with_empty, "empty_idat.png", mdl::data::Channels::Keep).to_vector<uint8_t>() ==
        img.to_vector<uint8_t>());
  // The same with the empty IDAT last and its CRC cut short, as a later fuzz input had it.
  std::vector<uint8_t> cut_last(good.begin(), good.end() - 12);  // without IEND
  for (size_t i = 0; i < 10; ++i) cut_last.push_back(empty_idat[i]);
  try {
    mdl::data::decode_image(cut_last, "cut_idat.png", mdl::data::Channels::Keep);
  } catch (const mdl::Error&) {}
}

// fuzz_image: a PGM whose maxval has 24 digits. stb_image reads header numbers into an int without
// an overflow check (UBSan: signed integer overflow); decode_image refuses numbers over 9 digits.
TEST_CASE("fuzz regression: a PNM header number too long for an int, or a 16-bit PNM, is refused") {
  auto pgm = [](const std::string& header) {
    std::vector<uint8_t> v;
    for (char c : header) v.push_back(uint8_t(c));
    for (int i = 0; i < 6; ++i) v.push_back(uint8_t(i));
    return v;
  };
  CHECK_THROWS_WITH_AS(
      mdl::data::decode_image(pgm("P5\n3 2\n254111111111111111111111\n"), "fuzz.pgm", mdl::data::Channels::Keep),
      doctest::Contains("'fuzz.pgm' has a PNM header number of more than 9 digits"), mdl::Error);
  // fuzz_image: a 16-bit PGM (maxval 2655): stb 2.27's 16-to-8-bit conversion read past its buffer
  // (ASan: heap-buffer-overflow in stbi__convert_16_to_8).
  CHECK_THROWS_WITH_AS(mdl::data::decode_image(pgm("P5\n3 2653 2655="), "wide.pgm", mdl::data::Channels::Keep),
                       doctest::Contains("or a maxval over 255"), mdl::Error);
  const std::vector<uint8_t> good = pgm("P5\n# a comment\n3 2\n255\n");
  CHECK(mdl::data::decode_image(good, "ok.pgm", mdl::data::Channels::Keep).shape() == mdl::Shape{2, 3, 1});
}

// fuzz_image: 145 bytes, SOI then a DHT segment whose 16 code counts are 0 x 8, 0x1a, 0x0a, 0xff x 6
// (past 256 codes), then 0xFF to the end. stb 2.27 writes one entry per code into a 257-entry array
// (UBSan: index 257 out of bounds in stbi__build_huffman); decode_image refuses the table.
TEST_CASE("fuzz regression: a JPEG Huffman table of more than 256 codes is refused") {
  std::vector<uint8_t> bad = {0xff, 0xd8, 0xff, 0xff, 0xff, 0xc4, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00,
                              0x00, 0x00, 0x00, 0x00, 0x1a, 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  while (bad.size() < 145) bad.push_back(0xff);
  CHECK_THROWS_WITH_AS(mdl::data::decode_image(bad, "fuzz.jpg", mdl::data::Channels::Keep),
                       doctest::Contains("'fuzz.jpg' has a JPEG Huffman table (DHT) of more than 256 codes"),
                       mdl::Error);

  // A valid JPEG still decodes, also with 0xFF C4 and a table-like tail inside a comment before the
  // scan (the walk skips segments by their length). A bad DHT after the scan is refused.
  std::vector<uint8_t> good, px(8 * 6 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 7);
  REQUIRE(stbi_write_jpg_to_func(
      [](void* out, void* data, int n) {
        auto* v = static_cast<std::vector<uint8_t>*>(out);
        for (int i = 0; i < n; ++i) v->push_back(static_cast<uint8_t*>(data)[i]);
      },
      &good, 8, 6, 3, px.data(), 90));
  const mdl::Shape shape{6, 8, 3};
  CHECK(mdl::data::decode_image(good, "good.jpg", mdl::data::Channels::Keep).shape() == shape);
  std::vector<uint8_t> comment = {0xff, 0xfe, 0x00, 0x16, 0xff, 0xc4, 0x00, 0x20, 0x00};
  while (comment.size() < 2 + 0x16) comment.push_back(0xff);
  std::vector<uint8_t> with_comment(good.begin(), good.begin() + 2);
  for (uint8_t b : comment) with_comment.push_back(b);
  for (size_t i = 2; i < good.size(); ++i) with_comment.push_back(good[i]);
  CHECK(mdl::data::decode_image(with_comment, "comment.jpg", mdl::data::Channels::Keep).shape() == shape);
  std::vector<uint8_t> late_dht(good.begin(), good.end() - 2);  // without EOI
  for (size_t i = 2; i < 25; ++i) late_dht.push_back(bad[i]);
  late_dht.push_back(0xff);
  late_dht.push_back(0xd9);
  CHECK_THROWS_WITH_AS(mdl::data::decode_image(late_dht, "late.jpg", mdl::data::Channels::Keep),
                       doctest::Contains("more than 256 codes"), mdl::Error);
}
