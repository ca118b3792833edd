// safetensors checkpoints: bit-exact round trips for every dtype and shape, the byte layout
// checked by hand, atomic writes, every malformed-file error the reader must raise, the JSON
// reader on its own, and files exchanged with an independent pure-Python reader and writer.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "io/json.h"
#include "mdl.h"
#include "tests/support/data_test_util.h"
#include "tests/support/test_util.h"

using namespace mdl;
namespace fs = std::filesystem;
using data_test::TempDir;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
  return s;
}

// A file from a header text (padded to 8 with spaces) and a data buffer.
std::string file_bytes(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return u64_le(header.size()) + header + data;
}

// The tensor's elements in row-major order, as raw bytes.
std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

template <class T>
Tensor blob(const std::vector<T>& v, const Shape& shape, DType dtype) {
  return from_blob(v.data(), shape, dtype);
}

template <class T, class B>
std::vector<T> from_bits(const std::vector<B>& bits) {
  static_assert(sizeof(T) == sizeof(B));
  std::vector<T> out(bits.size());
  std::memcpy(out.data(), bits.data(), bits.size() * sizeof(B));
  return out;
}

void check_same(const NamedTensors& got, const NamedTensors& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("tensor ", want[i].first);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.dtype() == want[i].second.dtype());
    CHECK(got[i].second.shape() == want[i].second.shape());
    CHECK(got[i].second.is_contiguous());
    CHECK(bytes_of(got[i].second) == bytes_of(want[i].second));
  }
}

// doctest::Contains for a message built at run time.
doctest::Contains has(const std::string& s) { return doctest::Contains(s.c_str()); }

const std::string kEntryA = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

}  // namespace

TEST_CASE("safetensors round trip is bit-exact for every dtype") {
  TempDir dir;
  std::vector<uint32_t> f32_bits = {0x3F800000, 0x7FC00000, 0x7FC00001, 0xFFC12345, 0x7F800000,
                                    0xFF800000, 0x80000000, 0x00000001, 0x7F7FFFFF, 0xBEAAAAAB};
  std::vector<uint16_t> f16_bits = {0x3C00, 0x7E01, 0xFE00, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x7BFF};
  std::vector<uint16_t> bf16_bits = {0x3F80, 0x7FC1, 0xFFC0, 0x7F80, 0xFF80, 0x8000, 0x0001, 0x7F7F};
  std::vector<uint64_t> f64_bits = {0x3FF0000000000000, 0x7FF8000000000001, 0xFFF0000000000000,
                                    0x8000000000000000, 0x0000000000000001, 0x400921FB54442D18};
  std::vector<int32_t> i32 = {std::numeric_limits<int32_t>::min(), -1, 0, 1, std::numeric_limits<int32_t>::max(), 7};
  std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -1, 0, std::numeric_limits<int64_t>::max()};
  std::vector<uint8_t> u8(256);
  for (int i = 0; i < 256; ++i) u8[size_t(i)] = uint8_t(255 - i);
  std::vector<uint8_t> bools = {1, 0, 0, 1, 1};

  NamedTensors want = {
      {"f32", blob(from_bits<float>(f32_bits), {2, 5}, kF32)},
      {"f16", blob(f16_bits, {8}, kF16)},
      {"bf16", blob(bf16_bits, {2, 2, 2}, kBF16)},
      {"f64", blob(from_bits<double>(f64_bits), {3, 2}, kF64)},
      {"i32", blob(i32, {6}, kI32)},
      {"i64", blob(i64, {2, 2}, kI64)},
      {"u8", blob(u8, {16, 16}, kU8)},
      {"bool", blob(bools, {5}, kBool)},
  };
  std::string path = dir.file("all.safetensors");
  io::save_safetensors(path, want);
  check_same(io::load_safetensors(path), want);

  // A different order is kept as given.
  NamedTensors reversed(want.rbegin(), want.rend());
  io::save_safetensors(path, reversed);
  check_same(io::load_safetensors(path), reversed);
  CHECK(dir.listing() == std::vector<std::string>{"all.safetensors"});
}

TEST_CASE("safetensors round trip of 0-dim and zero-size tensors") {
  TempDir dir;
  NamedTensors want = {
      {"scalar", scalar_tensor(2.5)},       {"empty", zeros({0})}, {"scalar_i64", scalar_tensor(-7, kI64)},
      {"empty_3d", zeros({3, 0, 2}, kF16)}, {"row", arange(4.0)},  {"empty_last", zeros({0, 5}, kBool)},
  };
  std::string path = dir.file("shapes.safetensors");
  io::save_safetensors(path, want);
  NamedTensors got = io::load_safetensors(path);
  check_same(got, want);
  CHECK(got[0].second.dim() == 0);
  CHECK(got[0].second.item<float>() == 2.5f);
  CHECK(got[2].second.item<int64_t>() == -7);

  // Only empty tensors: the data buffer is empty.
  io::save_safetensors(path, {{"a", zeros({0})}, {"b", zeros({2, 0})}});
  NamedTensors empties = io::load_safetensors(path);
  REQUIRE(empties.size() == 2);
  CHECK(empties[0].first == "a");
  CHECK(empties[1].second.shape() == Shape{2, 0});

  io::save_safetensors(path, {});
  CHECK(io::load_safetensors(path).empty());
}

TEST_CASE("safetensors saves non-contiguous tensors as their contiguous values") {
  TempDir dir;
  Tensor base = arange(12.0).view({3, 4});
  Tensor transposed = base.t();                                     // (4, 3), strides (1, 4)
  Tensor strided = base.slice(1, 0, 4, 2);                          // (3, 2), every other column
  Tensor expanded = arange(3.0, kI32).unsqueeze(0).expand({2, 3});  // stride 0
  Tensor half = base.to(kF16).t();
  REQUIRE(!transposed.is_contiguous());
  std::string path = dir.file("views.safetensors");
  io::save_safetensors(path, {{"t", transposed}, {"s", strided}, {"e", expanded}, {"h", half}});
  NamedTensors got = io::load_safetensors(path);
  REQUIRE(got.size() == 4);
  CHECK(got[0].second.shape() == Shape{4, 3});
  CHECK(got[0].second.to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(got[1].second.to_vector<float>() == std::vector<float>{0, 2, 4, 6, 8, 10});
  CHECK(got[2].second.to_vector<int32_t>() == std::vector<int32_t>{0, 1, 2, 0, 1, 2});
  CHECK(got[3].second.dtype() == kF16);
  CHECK(got[3].second.to_vector<float>() == got[0].second.to_vector<float>());
  // The views themselves are untouched.
  CHECK(!transposed.is_contiguous());
  CHECK(base.to_vector<float>()[5] == 5.0f);
}

TEST_CASE("safetensors metadata round trip") {
  TempDir dir;
  std::string path = dir.file("meta.safetensors");
  io::Metadata meta = {{"format", "pt"},
                       {"note", "quotes \" backslash \\ newline \n tab \t bell \x07 caf\xc3\xa9 \xf0\x9f\x98\x80"},
                       {"empty", ""},
                       {"", "empty key"}};
  io::save_safetensors(path, {{"w", ones({2})}}, meta);
  io::SafetensorsContents c = io::read_safetensors(path);
  CHECK(c.metadata == meta);
  REQUIRE(c.tensors.size() == 1);
  CHECK(c.tensors[0].first == "w");

  io::save_safetensors(path, {{"w", ones({2})}});
  CHECK(io::read_safetensors(path).metadata.empty());
  CHECK(read_bytes(path).find("__metadata__") == std::string::npos);

  // Metadata with no tensors at all.
  io::save_safetensors(path, {}, {{"k", "v"}});
  c = io::read_safetensors(path);
  CHECK(c.tensors.empty());
  CHECK(c.metadata == io::Metadata{{"k", "v"}});
}

TEST_CASE("safetensors byte layout of a small file") {
  TempDir dir;
  std::string path = dir.file("layout.safetensors");
  io::save_safetensors(path, {{"a", from_vector<float>({1.0f, -2.0f})}, {"b", from_vector<uint8_t>({7, 8, 9})}},
                       {{"k", "v"}});
  std::string bytes = read_bytes(path);
  const std::string json = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  uint64_t n = 0;
  REQUIRE(bytes.size() >= 8);
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  CHECK((8 + n) % 8 == 0);
  CHECK(n >= json.size());
  CHECK(n < json.size() + 8);
  CHECK(bytes.size() == 8 + n + 11);
  CHECK(bytes.substr(8, json.size()) == json);
  CHECK(bytes.substr(8 + json.size(), n - json.size()) == std::string(n - json.size(), ' '));
  float f[2] = {1.0f, -2.0f};
  CHECK(bytes.substr(8 + n, 8) == std::string(reinterpret_cast<const char*>(f), 8));
  CHECK(bytes.substr(8 + n + 8) == "\x07\x08\x09");
  CHECK(bytes == file_bytes(json, std::string(reinterpret_cast<const char*>(f), 8) + "\x07\x08\x09"));
}

// The data is laid out widest elements first (as the reference writer does), so every tensor
// starts at a multiple of its element size; the header, and so what the reader returns, keep the
// order given.
TEST_CASE("safetensors aligns each tensor's data to its element size, and keeps the names' order") {
  TempDir dir;
  std::string path = dir.file("aligned.safetensors");
  const NamedTensors given = {{"bias", from_vector<float>({1, 2, 3, 4, 5})},
                              {"count", scalar_tensor(7, kI64)},
                              {"half", from_vector<float>({1, 2, 3}).to(kF16)},
                              {"steps", from_vector<int64_t>({1, 2})},
                              {"mask", from_vector<uint8_t>({1})}};
  io::save_safetensors(path, given);
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  const std::string json = bytes.substr(8, n);
  // i64 first (count at 0, steps at 8), then f32 (bias at 24), f16 (at 44), u8 (at 50).
  CHECK(json.find(R"("count":{"dtype":"I64","shape":[],"data_offsets":[0,8]})") != std::string::npos);
  CHECK(json.find(R"("steps":{"dtype":"I64","shape":[2],"data_offsets":[8,24]})") != std::string::npos);
  CHECK(json.find(R"("bias":{"dtype":"F32","shape":[5],"data_offsets":[24,44]})") != std::string::npos);
  CHECK(json.find(R"("half":{"dtype":"F16","shape":[3],"data_offsets":[44,50]})") != std::string::npos);
  CHECK(json.find(R"("mask":{"dtype":"U8","shape":[1],"data_offsets":[50,51]})") != std::string::npos);
  CHECK(json.find("\"bias\"") < json.find("\"count\""));  // the header lists them as given
  const NamedTensors read = io::load_safetensors(path);
  REQUIRE(read.size() == given.size());
  for (size_t i = 0; i < given.size(); ++i) {
    CHECK(read[i].first == given[i].first);
    CHECK(read[i].second.to_vector<double>() == given[i].second.to_vector<double>());
  }
}

TEST_CASE("safetensors writes atomically") {
  TempDir dir;
  std::string path = dir.file("model.safetensors");

  SUBCASE("saving over an existing file replaces it") {
    write_bytes(path, std::string(1000, 'x'));
    io::save_safetensors(path, {{"w", full({3}, 4.0)}});
    NamedTensors got = io::load_safetensors(path);
    REQUIRE(got.size() == 1);
    CHECK(got[0].second.to_vector<float>() == std::vector<float>{4, 4, 4});
    io::save_safetensors(path, {{"v", full({1}, 5.0)}});
    CHECK(io::load_safetensors(path)[0].first == "v");
    CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
  }
  SUBCASE("a missing directory throws and leaves no temporary file") {
    std::string missing = dir.file("no/such/dir/model.safetensors");
    CHECK_THROWS_WITH_AS(io::save_safetensors(missing, {{"w", ones({2})}}),
                         has("save_safetensors: " + missing + ": cannot create the temporary file"), mdl::Error);
    CHECK_THROWS_WITH_AS(io::save_safetensors(missing, {{"w", ones({2})}}),
                         doctest::Contains("No such file or directory"), mdl::Error);
    CHECK(dir.listing().empty());
  }
  SUBCASE("a failed rename removes the temporary file and keeps the target") {
    fs::create_directories(dir.path / "model.safetensors" / "inside");
    CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"w", ones({2})}}),
                         doctest::Contains("cannot rename the temporary file"), mdl::Error);
    CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
    CHECK(fs::is_directory(dir.path / "model.safetensors" / "inside"));
  }
  SUBCASE("an argument error leaves the old file untouched") {
    io::save_safetensors(path, {{"w", ones({2})}});
    std::string before = read_bytes(path);
    CHECK_THROWS_AS(io::save_safetensors(path, {{"w", ones({2})}, {"w", ones({3})}}), mdl::Error);
    CHECK(read_bytes(path) == before);
    CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
  }
}

TEST_CASE("safetensors save rejects bad names and tensors") {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"w", ones({2})}, {"w", ones({3})}}),
                       has("save_safetensors: " + path + ": duplicate tensor name 'w'"), mdl::Error);
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"", ones({2})}}),
                       doctest::Contains("tensor names must be non-empty"), mdl::Error);
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"__metadata__", ones({2})}}),
                       doctest::Contains("is reserved for metadata"), mdl::Error);
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"w", Tensor()}}), doctest::Contains("tensor 'w' is undefined"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"bad\xff", ones({2})}}), doctest::Contains("is not valid UTF-8"),
                       mdl::Error);
  CHECK_THROWS_WITH_AS(io::save_safetensors(path, {{"w", ones({2})}}, {{"k", "1"}, {"k", "2"}}),
                       doctest::Contains("duplicate metadata key 'k'"), mdl::Error);
  CHECK(dir.listing().empty());
}

TEST_CASE("safetensors rejects malformed files") {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  auto load_error = [&](const std::string& bytes, const std::string& message) {
    write_bytes(path, bytes);
    INFO("expected: ", message);
    CHECK_THROWS_WITH_AS(io::load_safetensors(path), has(message), mdl::Error);
    std::string as_read = message;
    if (as_read.rfind("load_", 0) == 0) as_read.replace(0, 5, "read_");
    CHECK_THROWS_WITH_AS(io::read_safetensors(path), has(as_read), mdl::Error);
  };
  auto one = [](const std::string& entry) { return "{" + entry + "}"; };
  const std::string eight(8, '\0');

  SUBCASE("missing file, directory") {
    std::string missing = dir.file("absent.safetensors");
    CHECK_THROWS_WITH_AS(io::load_safetensors(missing),
                         has("load_safetensors: " + missing + ": cannot open: No such file or directory"), mdl::Error);
    CHECK_THROWS_WITH_AS(io::load_safetensors(dir.path.string()), doctest::Contains("not a regular file"), mdl::Error);
  }
  SUBCASE("too short for the length") {
    load_error("", "load_safetensors: " + path + ": the file is 0 bytes, too short for the 8-byte header length");
    load_error(std::string(7, '\0'), "the file is 7 bytes");
  }
  SUBCASE("header length") {
    load_error(u64_le(100) + "{}", "header length 100 runs past the end of the file (10 bytes");
    load_error(u64_le(uint64_t(1) << 63) + "{}",
               "header length 9223372036854775808 exceeds the format's limit of 100000000 bytes");
    load_error(u64_le(UINT64_MAX) + "{}", "exceeds the format's limit");
    load_error(u64_le(0), "invalid JSON at byte 0: unexpected end of input");
  }
  SUBCASE("not JSON, or not an object") {
    load_error(file_bytes(R"({"a": })", ""),
               "load_safetensors: " + path + ": header: invalid JSON at byte 6: unexpected '}'");
    load_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", eight), "expected ',' or '}'");
    load_error(file_bytes("[]", ""), "the header must be a JSON object, got a JSON array");
    load_error(file_bytes("\"x\"", ""), "got a JSON string");
    load_error(file_bytes(" {}", ""), "the header must start with '{'");
    load_error(file_bytes(std::string("{}\0", 3), ""), "unexpected byte 0x00 after the document");
    load_error(file_bytes("{\"a\xff\":1}", ""), "invalid UTF-8 byte 0xFF in a string");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), eight),
               "floating-point numbers are not supported");
  }
  SUBCASE("bad entries") {
    load_error(file_bytes(one(R"("a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]})"), eight),
               "tensor 'a' has unknown dtype 'F33'");
    load_error(file_bytes(one(R"("a":{"dtype":"I8","shape":[8],"data_offsets":[0,8]})"), eight),
               "tensor 'a' has dtype I8, which mdl does not support");
    load_error(file_bytes(one(R"("a":{"dtype":32,"shape":[2],"data_offsets":[0,8]})"), eight),
               "tensor 'a': dtype must be a string, got integer");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), eight),
               "tensor 'a' has a negative dimension -2 in its shape");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":"2","data_offsets":[0,8]})"), eight),
               "tensor 'a': shape must be an array of integers, got string");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0]})"), eight),
               "tensor 'a': data_offsets must be [begin, end]");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]})"), eight),
               "tensor 'a': data_offsets must be [begin, end]");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]})"), eight),
               "tensor 'a' has data_offsets [8, 0] with begin after end");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2]})"), eight), "tensor 'a' has no data_offsets");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1})"), eight),
               "tensor 'a' has an unexpected key 'extra'");
    load_error(file_bytes(one(R"("a":[1,2])"), eight), "tensor 'a' must be an object");
    load_error(file_bytes(one(R"("":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), eight),
               "a tensor has an empty name");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]})"),
                          eight),
               "tensor 'a' has a shape with too many elements");
    load_error(file_bytes(one(R"("a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]})"), eight),
               "need more than 2^64 bytes");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}, "__metadata__":[])"), eight),
               "__metadata__ must be an object of strings, got array");
    load_error(file_bytes(one(R"("__metadata__":{"k":1},)" + kEntryA), eight),
               "__metadata__ value for key 'k' must be a string, got integer");
  }
  SUBCASE("offsets and byte counts") {
    load_error(
        file_bytes(one(R"("fc.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]})"), std::string(12, '\0')),
        "load_safetensors: " + path +
            ": tensor 'fc.weight' has data_offsets [0, 12] but dtype F32 and shape [2,2] need 16 bytes");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), eight),
               "tensor 'a' has data_offsets [0, 16] past the end of the data buffer (8 bytes");
    load_error(
        file_bytes(one(R"("a":{"dtype":"U8","shape":[8],"data_offsets":[18446744073709551607,18446744073709551615]})"),
                   eight),
        "past the end of the data buffer");
    load_error(
        file_bytes(one(kEntryA + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]})"), std::string(12, '\0')),
        "tensors 'a' (data_offsets [0, 8]) and 'b' (data_offsets [4, 12]) overlap");
    load_error(
        file_bytes(one(kEntryA + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]})"), std::string(20, '\0')),
        "the data buffer has a hole: bytes [8, 12] between 'a' and 'b' belong to no tensor");
    load_error(file_bytes(one(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]})"), std::string(12, '\0')),
               "the data buffer has a hole: bytes [0, 4] before 'a'");
    load_error(file_bytes(one(kEntryA), std::string(12, '\0')),
               "the data buffer has 4 trailing bytes [8, 12] that belong to no tensor");
    load_error(file_bytes("{}", "xyz"), "the data buffer has 3 trailing bytes");
    load_error(file_bytes(one(kEntryA + R"(,"z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]})"), eight), "overlap");
  }
  SUBCASE("a truncated file") {
    io::save_safetensors(path, {{"w", ones({64})}, {"b", zeros({8})}});
    std::string full_file = read_bytes(path);
    load_error(full_file.substr(0, full_file.size() / 2), "past the end");
    load_error(full_file.substr(0, full_file.size() - 1), "past the end of the data buffer");
    load_error(full_file.substr(0, 40), "header length");
  }
  SUBCASE("duplicate names") {
    load_error(file_bytes(one(kEntryA + "," + kEntryA), std::string(16, '\0')), "duplicate key 'a'");
  }
  SUBCASE("deep nesting does not overflow the stack") {
    load_error(file_bytes(std::string(10000, '['), ""), "nested deeper than 64 levels");
    load_error(file_bytes("{\"a\":" + std::string(100000, '['), ""), "nested deeper than 64 levels");
  }
  SUBCASE("bool bytes other than 0 and 1") {
    load_error(
        file_bytes(one(R"("m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]})"), std::string("\x01\x00\x02", 3)),
        "tensor 'm' of dtype BOOL holds byte 2 at element 2 (expected 0 or 1)");
  }
}

TEST_CASE("safetensors survives every truncation and random corruption") {
  TempDir dir;
  std::string path = dir.file("fuzz.safetensors");
  io::save_safetensors(path, {{"w", arange(6.0).view({2, 3})}, {"b", ones({3}, kBool)}, {"s", scalar_tensor(1, kI64)}},
                       {{"k", "v"}});
  const std::string good = read_bytes(path);
  auto outcome = [&](const std::string& bytes) {  // 0 loaded, 1 mdl::Error, 2 anything else
    write_bytes(path, bytes);
    try {
      io::load_safetensors(path);
      return 0;
    } catch (const mdl::Error&) {
      return 1;
    } catch (...) {
      return 2;
    }
  };
  REQUIRE(outcome(good) == 0);
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to ", n, " bytes");
    CHECK(outcome(good.substr(0, n)) == 1);
  }
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int loaded = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    for (int k = 0, flips = 1 + int(next() % 3); k < flips; ++k) bytes[next() % bytes.size()] = char(next());
    int r = outcome(bytes);
    INFO("trial ", trial);
    CHECK(r != 2);
    loaded += r == 0;
  }
  CHECK(loaded > 0);  // corrupting tensor bytes (not bool ones) still loads
}

TEST_CASE("safetensors reads files laid out by other writers") {
  TempDir dir;
  std::string path = dir.file("other.safetensors");
  float a[2] = {1.5f, -3.0f};
  int64_t b[1] = {42};
  std::string data = std::string(reinterpret_cast<const char*>(b), 8) +
                     std::string(reinterpret_cast<const char*>(a), 8);
  // Whitespace and newlines, escaped names, keys not in offset order, an unpadded header.
  std::string header = "{\n  \"caf\\u00e9.w\" : {\"shape\": [2], \"dtype\": \"F32\", \"data_offsets\": [8, 16]},\n"
                       "  \"b\": {\"data_offsets\": [0, 8], \"shape\": [], \"dtype\": \"I64\"},\n"
                       "  \"__metadata__\": {\"format\": \"pt\"}\n}";
  write_bytes(path, u64_le(header.size()) + header + data);
  io::SafetensorsContents c = io::read_safetensors(path);
  REQUIRE(c.tensors.size() == 2);
  CHECK(c.tensors[0].first == "caf\xc3\xa9.w");  // the header's order, not the data's
  CHECK(c.tensors[0].second.to_vector<float>() == std::vector<float>{1.5f, -3.0f});
  CHECK(c.tensors[1].first == "b");
  CHECK(c.tensors[1].second.dim() == 0);
  CHECK(c.tensors[1].second.item<int64_t>() == 42);
  CHECK(c.metadata == io::Metadata{{"format", "pt"}});
}

TEST_CASE("safetensors json reader and writer") {
  using io::json::Value;
  auto parse = [](const std::string& s) { return io::json::parse(s, "test"); };

  Value v = parse(
      R"( {"s": "a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00", "n": [0, -0, 18446744073709551615, -9223372036854775808],
                        "t": true, "f": false, "z": null, "o": {}, "e": []} )");
  REQUIRE(v.is_object());
  CHECK(v.keys == std::vector<std::string>{"s", "n", "t", "f", "z", "o", "e"});
  CHECK(v.find("s")->str == "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  const Value& n = *v.find("n");
  REQUIRE(n.items.size() == 4);
  CHECK(n.items[0].magnitude == 0);
  CHECK(!n.items[1].negative);
  CHECK(n.items[2].magnitude == UINT64_MAX);
  CHECK(n.items[3].negative);
  CHECK(n.items[3].magnitude == uint64_t(1) << 63);
  CHECK(v.find("t")->boolean);
  CHECK(v.find("z")->kind == Value::Kind::Null);
  CHECK(v.find("missing") == nullptr);

  // dump then parse gives the same document back.
  std::string text = io::json::dump(v);
  CHECK(io::json::dump(parse(text)) == text);
  CHECK(io::json::quote("a\x01\"") == "\"a\\u0001\\\"\"");

  auto bad = [&](const std::string& s, const std::string& message) {
    INFO("input: ", s);
    CHECK_THROWS_WITH_AS(parse(s), has(message), mdl::Error);
  };
  bad("", "test: invalid JSON at byte 0: unexpected end of input");
  bad("[1,]", "unexpected ']'");
  bad("[1 2]", "expected ',' or ']'");
  bad("{\"a\" 1}", "expected ':'");
  bad("{1:2}", "expected a string key");
  bad("{\"a\":1,\"a\":2}", "invalid JSON at byte 7: duplicate key 'a'");
  bad("18446744073709551616", "integer out of range");
  bad("-9223372036854775809", "integer out of range");
  bad("01", "leading zeros");
  bad("1.5", "floating-point numbers are not supported");
  bad("1e3", "floating-point numbers are not supported");
  bad("-", "expected a digit");
  bad("\"abc", "unterminated string");
  bad("\"a\tb\"", "unescaped control character");
  bad("\"\\x\"", "unknown escape 'x'");
  bad("\"\\u12g4\"", "bad hex digit 'g'");
  bad("\"\\u12\"", "unexpected end of input in a \\u escape");
  bad("\"\\udc00\"", "lone low surrogate");
  bad("\"\\ud800x\"", "high surrogate not followed by a low surrogate");
  bad("\"\xc0\x80\"", "invalid UTF-8");
  bad("\"\xed\xa0\x80\"", "invalid UTF-8");
  bad("\"\xf4\x90\x80\x80\"", "invalid UTF-8");
  bad("tru", "unexpected 't'");
  bad("1 1", "after the document");
  bad(std::string(65, '[') + std::string(65, ']'), "nested deeper than 64 levels");
  CHECK_NOTHROW(parse(std::string(64, '[') + std::string(64, ']')));
  io::json::Limits few;
  few.max_values = 3;
  CHECK_THROWS_WITH_AS(io::json::parse("[1,2,3]", "test", few), doctest::Contains("more than 3 values"), mdl::Error);

  CHECK(io::json::valid_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  CHECK(!io::json::valid_utf8("\xc3"));
  CHECK(!io::json::valid_utf8("\xe0\x80\x80"));
}

namespace {
bool python3_available() { return std::system("python3 -c 'import json, struct' >/dev/null 2>&1") == 0; }
}  // namespace

// Skipped (and reported skipped) where python3 is missing.
TEST_CASE("safetensors interoperates with a pure-Python reader and writer" * doctest::skip(!python3_available())) {
  TempDir dir;
  std::string ours = dir.file("mdl.safetensors"), theirs = dir.file("python.safetensors");
  std::string script_path = dir.file("check.py");
  // Reads mdl's file with struct and json only (and checks bf16 against torch when present),
  // then writes a file of its own the way Python writers lay it out.
  write_bytes(script_path, R"PY(
import json, math, struct, sys
src, dst = sys.argv[1], sys.argv[2]
blob = open(src, 'rb').read()
n = struct.unpack('<Q', blob[:8])[0]
assert (8 + n) % 8 == 0, n
header = json.loads(blob[8:8 + n].decode('utf-8'))
assert header.pop('__metadata__') == {'framework': 'mdl', 'note': 'caf\u00e9'}
data = blob[8 + n:]
spans = sorted(tuple(e['data_offsets']) for e in header.values())
assert spans[0][0] == 0 and spans[-1][1] == len(data)
assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))

def values(name, dtype, shape, fmt):
    e = header[name]
    assert e['dtype'] == dtype and e['shape'] == shape, (name, e)
    b, end = e['data_offsets']
    count = (end - b) // struct.calcsize(fmt)
    return list(struct.unpack('<%d%s' % (count, fmt), data[b:end]))

def bf16_of(x):
    bits = struct.unpack('<I', struct.pack('<f', x))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16

src_bf16 = [1 + i / 1024 for i in range(8)] + [3.14159, -1e-3]
assert values('f32', 'F32', [2, 3], 'f') == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
assert values('f16', 'F16', [4], 'e') == [0.5, -1.0, 2.0, 65504.0]
assert values('bf16', 'BF16', [10], 'H') == [bf16_of(x) for x in src_bf16]
assert values('f64', 'F64', [], 'd') == [math.pi]
assert values('i64', 'I64', [2], 'q') == [-2**63, 2**63 - 1]
assert values('i32', 'I32', [1, 2], 'i') == [-5, 7]
assert values('u8', 'U8', [3], 'B') == [0, 128, 255]
assert values('mask', 'BOOL', [3], '?') == [True, False, True]
assert values('empty', 'F32', [0, 4], 'f') == []
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    b, end = header['bf16']['data_offsets']
    got = torch.frombuffer(bytearray(data[b:end]), dtype=torch.int16)
    want = torch.tensor([struct.unpack('<f', struct.pack('<f', x))[0] for x in src_bf16]).to(torch.bfloat16).view(torch.int16)
    assert torch.equal(got, want)

tensors = [('z', 'F64', [], struct.pack('<d', math.e)),
           ('w\u00fcrfel', 'I32', [2, 2], struct.pack('<4i', 1, -2, 3, -4)),
           ('empty', 'F32', [0, 3], b''),
           ('h', 'F16', [2], struct.pack('<2e', 1.5, -0.25))]
out, at = {'__metadata__': {'source': 'python'}}, 0
for name, dtype, shape, raw in tensors:
    out[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [at, at + len(raw)]}
    at += len(raw)
text = json.dumps(out, sort_keys=True).encode('utf-8')
text += b' ' * ((8 - (8 + len(text)) % 8) % 8)
with open(dst, 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + b''.join(t[3] for t in tensors))
)PY");

  std::vector<float> bf16_src;
  for (int i = 0; i < 8; ++i) bf16_src.push_back(1.0f + float(i) / 1024.0f);
  bf16_src.push_back(3.14159f);
  bf16_src.push_back(-1e-3f);
  bool mask[3] = {true, false, true};
  io::save_safetensors(
      ours,
      {{"f32", arange(6.0).view({2, 3})},
       {"f16", from_vector<float>({0.5f, -1.0f, 2.0f, 65504.0f}).to(kF16)},
       {"bf16", from_vector<float>(bf16_src).to(kBF16)},
       {"f64", scalar_tensor(M_PI, kF64)},
       {"empty", zeros({0, 4})},
       {"i64", from_vector<int64_t>({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})},
       {"i32", from_vector<int32_t>({-5, 7}, {1, 2})},
       {"u8", from_vector<uint8_t>({0, 128, 255})},
       {"mask", from_blob(mask, {3}, kBool)}},
      {{"framework", "mdl"}, {"note", "caf\xc3\xa9"}});
  std::string cmd = "python3 '" + script_path + "' '" + ours + "' '" + theirs + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);

  io::SafetensorsContents c = io::read_safetensors(theirs);
  CHECK(c.metadata == io::Metadata{{"source", "python"}});
  REQUIRE(c.tensors.size() == 4);
  // In the header's order, which Python's json.dumps(sort_keys=True) sorted by name.
  CHECK(c.tensors[0].first == "empty");
  CHECK(c.tensors[0].second.shape() == Shape{0, 3});
  CHECK(c.tensors[1].first == "h");
  CHECK(c.tensors[1].second.dtype() == kF16);
  CHECK(c.tensors[1].second.to_vector<float>() == std::vector<float>{1.5f, -0.25f});
  CHECK(c.tensors[2].first == "w\xc3\xbcrfel");
  CHECK(c.tensors[2].second.shape() == Shape{2, 2});
  CHECK(c.tensors[2].second.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3, -4});
  CHECK(c.tensors[3].first == "z");
  CHECK(c.tensors[3].second.item<double>() == M_E);
}

TEST_CASE("cuda: safetensors saves tensors that live on a GPU" * MDL_CUDA_ONLY) {
  TempDir dir;
  std::string path = dir.file("gpu.safetensors");
  Tensor x = arange(6.0).view({2, 3}).to(Device::cuda());
  io::save_safetensors(path, {{"xt", x.t()}, {"h", x.to(kF16)}});
  NamedTensors got = io::load_safetensors(path);
  REQUIRE(got.size() == 2);
  CHECK(got[0].second.device() == Device::cpu());
  CHECK(got[0].second.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(got[1].second.dtype() == kF16);
  CHECK(got[1].second.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
}
