// Inputs the libFuzzer harnesses (fuzz/) found, replayed: each must now raise an mdl::Error, not
// undefined behaviour. The bytes are the harness's input, minimized, and split as that harness splits it.
#include <doctest/doctest.h>

#include "data/idx.h"
#include "data/image.h"
#include "data_test_util.h"
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
}
