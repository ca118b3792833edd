// Inputs the libFuzzer harnesses (fuzz/) found, replayed: each must now raise an mdl::Error, not
// undefined behaviour. The bytes are the harness's input, minimized, and split as that harness splits it.
#include <doctest/doctest.h>

#include "data/idx.h"
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
