// read_maybe_gzip against hostile and unusual input: a bomb stops at the inflate limit with an
// error naming the file, concatenated members are all read, a cut stream is an error.
// read_maybe_gzip_head inflates only what it returns, and IdxDataset checks a gzip file's header
// before inflating its payload, and inflates no further than the header says the data ends.
#include <doctest/doctest.h>
#include <zlib.h>

#include "data/file_util.h"
#include "data/idx.h"
#include "tests/support/data_test_util.h"
#include "tensor/error.h"

using namespace mdl;
using data_test::TempDir;

namespace {

std::vector<uint8_t> gzip(const std::vector<uint8_t>& plain) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(deflateBound(&z, uLong(plain.size())));
  z.next_in = const_cast<uint8_t*>(plain.data());
  z.avail_in = uInt(plain.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

TEST_CASE("gzip: a bomb stops at the inflate limit, naming the file and the limit") {
  TempDir dir("gzip");
  const std::string path = dir.file("bomb.gz");
  const std::vector<uint8_t> bomb = gzip(std::vector<uint8_t>(size_t(64) << 20, 0));  // 64 MiB of zeros
  CHECK(bomb.size() < 100'000);
  data_test::write_bytes(path, bomb);
  CHECK_THROWS_WITH_AS(data::read_maybe_gzip(path, "test", size_t(8) << 20),
                       doctest::Contains("bomb.gz' at compressed offset"), Error);
  CHECK_THROWS_WITH_AS(data::read_maybe_gzip(path, "test", size_t(8) << 20),
                       doctest::Contains("inflates past the limit of 8388608 bytes"), Error);
  CHECK(data::read_maybe_gzip(path, "test", size_t(64) << 20).size() == size_t(64) << 20);  // exactly at the limit
}

TEST_CASE("gzip: concatenated members are joined; a cut or padded stream is an error") {
  TempDir dir("gzip");
  std::vector<uint8_t> a(1000), b(3000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 13 + 1);
  std::vector<uint8_t> both = gzip(a), gb = gzip(b);
  both.insert(both.end(), gb.begin(), gb.end());
  data_test::write_bytes(dir.file("two.gz"), both);
  std::vector<uint8_t> want = a;
  want.insert(want.end(), b.begin(), b.end());
  CHECK(data::read_maybe_gzip(dir.file("two.gz"), "test") == want);

  std::vector<uint8_t> cut = gzip(b);
  cut.resize(cut.size() / 2);
  data_test::write_bytes(dir.file("cut.gz"), cut);
  CHECK_THROWS_WITH_AS(data::read_maybe_gzip(dir.file("cut.gz"), "test"), doctest::Contains("truncated gzip stream"),
                       Error);

  std::vector<uint8_t> padded = gzip(a);
  padded.insert(padded.end(), {'x', 'y', 'z', 'w'});
  data_test::write_bytes(dir.file("padded.gz"), padded);
  CHECK_THROWS_WITH_AS(data::read_maybe_gzip(dir.file("padded.gz"), "test"), doctest::Contains("padded.gz"), Error);
}

TEST_CASE("gzip: read_maybe_gzip_head returns the first bytes, inflating no further") {
  TempDir dir("gzip");
  std::vector<uint8_t> plain(1000);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = uint8_t(i * 7);
  // Bytes that are no gzip member after a valid one: inflating up to them is an error.
  std::vector<uint8_t> padded = gzip(plain);
  padded.insert(padded.end(), {'x', 'y', 'z', 'w'});
  data_test::write_bytes(dir.file("padded.gz"), padded);
  CHECK(data::read_maybe_gzip_head(dir.file("padded.gz"), "test", 10) ==
        std::vector<uint8_t>(plain.begin(), plain.begin() + 10));
  CHECK_THROWS_WITH_AS(data::read_maybe_gzip_head(dir.file("padded.gz"), "test", 1001), doctest::Contains("padded.gz"),
                       Error);
  data_test::write_bytes(dir.file("whole.gz"), gzip(plain));
  CHECK(data::read_maybe_gzip_head(dir.file("whole.gz"), "test", 5000) == plain);
  data_test::write_bytes(dir.file("raw"), plain);
  CHECK(data::read_maybe_gzip_head(dir.file("raw"), "test", 3) == std::vector<uint8_t>{0, 7, 14});
  CHECK(data::read_maybe_gzip_head(dir.file("raw"), "test", 5000) == plain);
}

TEST_CASE(
    "IdxDataset: a gzip file's header is checked first, and its payload inflated only as far as the header says") {
  TempDir dir("gzip");
  // Each file: one gzip member, then bytes that are no member, which a full inflate stops at.
  auto write_gzip_then_junk = [&](const std::string& name, const std::vector<uint8_t>& plain) {
    std::vector<uint8_t> bytes = gzip(plain);
    bytes.insert(bytes.end(), {'j', 'u', 'n', 'k'});
    data_test::write_bytes(dir.file(name), bytes);
    return dir.file(name);
  };
  std::vector<uint8_t> labels = data_test::idx_bytes({10}, std::vector<uint8_t>(10, 1));
  labels.resize(labels.size() + (size_t(1) << 20));  // 1 MiB of zeros the header does not declare
  const std::string trailing = write_gzip_then_junk("trailing.gz", labels);
  CHECK_THROWS_WITH_AS(
      data::read_idx(trailing),
      doctest::Contains(("'" + trailing + "' with dims [10] has trailing bytes after offset 18").c_str()), Error);
  std::vector<uint8_t> ints = data_test::idx_bytes({10}, std::vector<uint8_t>(10, 1));
  ints[2] = 0x0c;
  ints.resize(ints.size() + (size_t(1) << 20));
  const std::string dtype = write_gzip_then_junk("dtype.gz", ints);
  CHECK_THROWS_WITH_AS(data::read_idx(dtype), doctest::Contains("has dtype code 0xc at offset 2"), Error);
  const std::string good = write_gzip_then_junk("good.gz", data_test::idx_bytes({3}, {4, 5, 6}));
  CHECK_THROWS_WITH_AS(data::read_idx(good), doctest::Contains("good.gz' at compressed offset"), Error);
}
