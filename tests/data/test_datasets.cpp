// Datasets: byte-exact Fashion-MNIST samples (values read from the Debian files), IDX, ImageFolder
// (PNG, BMP, JPEG, PGM, GIF, channel conversion), CIFAR-10 and CIFAR-100 binary, TensorDataset,
// TextDataset, Subset and ClassSubset, and every bad-input error they raise (a FIFO in a file's
// place refused without blocking), on files the tests make themselves.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <stb/stb_image_write.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <numeric>

#include "data/cifar.h"
#include "data/class_subset.h"
#include "data/export.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/tensor_dataset.h"
#include "data/text.h"
#include "tests/support/data_test_util.h"
#include "mdl.h"

using namespace mdl;
using namespace data_test;
using data::Channels;

namespace {
std::vector<uint8_t> row(const Tensor& image, int64_t y) {
  std::vector<uint8_t> all = image.to_vector<uint8_t>();
  const int64_t w = image.size(1) * image.size(2);
  return std::vector<uint8_t>(all.begin() + y * w, all.begin() + (y + 1) * w);
}
// The error `read` raises, which must come without blocking on `fifo`; a read blocked opening it
// is released after 5 s by opening the FIFO's writing end.
std::string error_without_blocking(const std::string& fifo, const std::function<void()>& read) {
  auto result = std::async(std::launch::async, [&] {
    try {
      read();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  });
  const bool blocked = result.wait_for(std::chrono::seconds(5)) != std::future_status::ready;
  if (blocked) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  CHECK_FALSE(blocked);
  return result.get();
}
int64_t pixel_sum(const Tensor& image) {
  std::vector<uint8_t> v = image.to_vector<uint8_t>();
  return std::accumulate(v.begin(), v.end(), int64_t(0));
}
}  // namespace

// Expected values read independently from the Debian files with Python's gzip module:
//   im = gzip.open('.../train-images-idx3-ubyte.gz').read(); base = 16 + i*784
//   list(im[base + 14*28 : base + 15*28]), sum(im[base:base+784]), labels from byte 8 + i
// and row 14 of image 0 cross-checked with
//   zcat train-images-idx3-ubyte.gz | od -A d -t u1 -j $((16+14*28)) -N 28
TEST_CASE("data: FashionMNIST decodes known samples byte-exactly") {
  data::FashionMNIST train;  // /usr/share/datasets/fashion-mnist
  REQUIRE(train.size() == 60000);
  CHECK(train.height() == 28);
  CHECK(train.width() == 28);
  data::Sample s0 = train.get(0);
  CHECK(s0.x.shape() == Shape{28, 28, 1});
  CHECK(s0.x.dtype() == kU8);
  CHECK(s0.y.dim() == 0);
  CHECK(s0.y.item<int64_t>() == 9);
  CHECK(row(s0.x, 14) == std::vector<uint8_t>{0,   0,   1,   4,   6,   7,   2,   0,   0,   0,   0,   0,   237, 226,
                                              217, 223, 222, 219, 222, 221, 216, 223, 229, 215, 218, 255, 77,  0});
  CHECK(pixel_sum(s0.x) == 76247);
  data::Sample s1 = train.get(1);
  CHECK(s1.y.item<int64_t>() == 0);
  CHECK(row(s1.x, 14) == std::vector<uint8_t>{0,   0,   0,   0,   0,   1,   0,   11, 197, 199, 205, 202, 205, 206,
                                              204, 205, 207, 204, 205, 205, 218, 77, 0,   5,   0,   0,   0,   0});
  CHECK(pixel_sum(s1.x) == 84598);
  data::Sample last = train.get(59999);
  CHECK(last.y.item<int64_t>() == 5);
  CHECK(pixel_sum(last.x) == 16684);
  CHECK(row(last.x, 14) == std::vector<uint8_t>{0, 0, 0, 0,  9,   56, 144, 133, 129, 153, 34, 0, 3, 3,
                                                0, 3, 0, 24, 104, 89, 104, 109, 0,   0,   0,  1, 1, 0});

  data::FashionMNIST test(data::kFashionMnistRoot, /*train=*/false);
  REQUIRE(test.size() == 10000);
  CHECK(test.get(0).y.item<int64_t>() == 9);
  CHECK(pixel_sum(test.get(0).x) == 33456);
  CHECK(test.get(9999).y.item<int64_t>() == 5);
  CHECK(data::FashionMNIST::classes().at(9) == "Ankle boot");
  CHECK_THROWS_WITH_AS(train.get(60000), doctest::Contains("index 60000 out of range"), Error);
  CHECK_THROWS_WITH_AS(train.get(-1), doctest::Contains("index -1 out of range"), Error);
}

TEST_CASE("data: IdxDataset reads raw and gzip files and rejects bad ones naming file and offset") {
  TempDir dir;
  std::vector<uint8_t> pixels(3 * 2 * 2);
  std::iota(pixels.begin(), pixels.end(), uint8_t(100));
  write_bytes(dir.file("img"), idx_bytes({3, 2, 2}, pixels));
  write_bytes(dir.file("lbl"), idx_bytes({3}, {4, 5, 6}));
  data::IdxDataset ds(dir.file("img"), dir.file("lbl"));
  REQUIRE(ds.size() == 3);
  CHECK(ds.get(2).x.to_vector<uint8_t>() == std::vector<uint8_t>{108, 109, 110, 111});
  CHECK(ds.get(2).y.item<int64_t>() == 6);

  SUBCASE("gzip") {
    std::string gz = dir.file("img.gz");
    REQUIRE(std::system(("gzip -c " + dir.file("img") + " > " + gz).c_str()) == 0);
    data::IdxDataset z(gz, dir.file("lbl"));
    CHECK(z.get(1).x.to_vector<uint8_t>() == std::vector<uint8_t>{104, 105, 106, 107});
    std::vector<uint8_t> bytes = read_bytes(gz);
    write_bytes(dir.file("trunc.gz"),
                std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(bytes.size() / 2)));
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("trunc.gz"), dir.file("lbl")),
                         doctest::Contains("truncated gzip stream"), Error);
    bytes[12] ^= 0xff;
    bytes[13] ^= 0xff;
    write_bytes(dir.file("corrupt.gz"), bytes);
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("corrupt.gz"), dir.file("lbl")), doctest::Contains("corrupt.gz"),
                         Error);
  }
  SUBCASE("wrong magic") {
    std::vector<uint8_t> b = idx_bytes({3, 2, 2}, pixels);
    b[0] = 0x1f;
    b[1] = 0x00;
    write_bytes(dir.file("bad"), b);
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("bad"), dir.file("lbl")), doctest::Contains("bad magic number"),
                         Error);
  }
  SUBCASE("dtype code") {
    std::vector<uint8_t> b = idx_bytes({3, 2, 2}, pixels);
    b[2] = 0x0d;
    write_bytes(dir.file("f32"), b);
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("f32"), dir.file("lbl")),
                         doctest::Contains("dtype code 0xd at offset 2"), Error);
  }
  SUBCASE("truncated payload, with the offset") {
    std::vector<uint8_t> b = idx_bytes({3, 2, 2}, pixels);
    b.erase(b.end() - 5, b.end());
    write_bytes(dir.file("short"), b);
    CHECK_THROWS_WITH_AS(
        data::IdxDataset(dir.file("short"), dir.file("lbl")),
        doctest::Contains("truncated: the header declares 12 bytes of data, the file ends at offset 23"), Error);
    write_bytes(dir.file("header"), {0, 0, 8, 3, 0, 0});
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("header"), dir.file("lbl")),
                         doctest::Contains("truncated in its header"), Error);
  }
  SUBCASE("mismatched label count") {
    write_bytes(dir.file("lbl4"), idx_bytes({4}, {1, 2, 3, 4}));
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("img"), dir.file("lbl4")),
                         doctest::Contains("image and label counts differ"), Error);
  }
  SUBCASE("missing file, wrong rank") {
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("nope"), dir.file("lbl")), doctest::Contains("nope': No such file"),
                         Error);
    CHECK_THROWS_WITH_AS(data::IdxDataset(dir.file("lbl"), dir.file("lbl")), doctest::Contains("images need 3"), Error);
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()), doctest::Contains("not found"), Error);
  }
  SUBCASE("a Fashion-MNIST label past its ten classes") {
    write_bytes(dir.file("train-images-idx3-ubyte"), idx_bytes({3, 2, 2}, pixels));
    write_bytes(dir.file("train-labels-idx1-ubyte"), idx_bytes({3}, {9, 250, 0}));
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()),
                         doctest::Contains("train-labels-idx1-ubyte' has label 250 for sample 1 (expected 0 to 9)"),
                         Error);
  }
}

TEST_CASE("data: ImageFolder decodes PNG, BMP, JPEG, PGM and GIF, sorted by class, with channel conversion") {
  TempDir dir;
  make_image_folder(dir.path / "root", 2, 3, 4, 5, 3);
  // Extra formats in a third class, which sorts last; non-image files are ignored.
  fs::create_directories(dir.path / "root" / "zz");
  Tensor rgb = make_tensor({4, 5, 3}, kU8, Device::cpu());
  for (int k = 0; k < 60; ++k) rgb.data_ptr<uint8_t>()[k] = uint8_t(k * 4);
  REQUIRE(stbi_write_bmp(dir.file("root/zz/a.bmp").c_str(), 5, 4, 3, rgb.raw_data()));
  Tensor flat = full({4, 5, 3}, 120.0, kU8);
  REQUIRE(stbi_write_jpg(dir.file("root/zz/b.jpg").c_str(), 5, 4, 3, flat.raw_data(), 95));
  std::vector<uint8_t> pgm = {'P', '5', '\n', '2', ' ', '1', '\n', '2', '5', '5', '\n', 17, 230};
  write_bytes(dir.file("root/zz/c.pgm"), pgm);
  // A 1x1 GIF89a, hand-made: a two-colour palette (16,32,48), (240,224,208); the pixel is index 0.
  write_bytes(dir.file("root/zz/d.gif"),
              {0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x10, 0x20,
               0x30, 0xf0, 0xe0, 0xd0, 0x21, 0xf9, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00,
               0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b});
  write_bytes(dir.file("root/zz/readme.txt"), {'h', 'i'});
  // Images below a class folder are not read (torchvision's ImageFolder would read this one).
  fs::create_directories(dir.path / "root" / "zz" / "nested");
  write_bytes(dir.file("root/zz/nested/e.pgm"), pgm);

  data::ImageFolder ds((dir.path / "root").string());
  REQUIRE(ds.size() == 10);
  CHECK(ds.classes() == std::vector<std::string>{"class_0", "class_1", "zz"});
  data::Sample s = ds.get(4);  // class_1, img_1
  CHECK(s.y.item<int64_t>() == 1);
  REQUIRE(s.x.shape() == Shape{4, 5, 3});
  std::vector<uint8_t> v = s.x.to_vector<uint8_t>();
  CHECK(v[(2 * 5 + 3) * 3 + 1] == pixel(1, 1, 2, 3, 1));
  CHECK(v[0] == pixel(1, 1, 0, 0, 0));
  CHECK(ds.get(6).x.to_vector<uint8_t>() == rgb.to_vector<uint8_t>());  // a.bmp, lossless
  std::vector<uint8_t> jpg = ds.get(7).x.to_vector<uint8_t>();
  for (uint8_t p : jpg) CHECK(std::abs(int(p) - 120) <= 2);
  data::Sample gray = ds.get(8);  // c.pgm: 1 channel, converted to RGB
  CHECK(gray.x.shape() == Shape{1, 2, 3});
  CHECK(gray.x.to_vector<uint8_t>() == std::vector<uint8_t>{17, 17, 17, 230, 230, 230});
  CHECK(gray.y.item<int64_t>() == 2);
  CHECK(ds.get(9).x.to_vector<uint8_t>() == std::vector<uint8_t>{16, 32, 48});  // d.gif

  data::ImageFolder g((dir.path / "root").string(), Channels::Gray);
  Tensor gx = g.get(0).x;
  REQUIRE(gx.shape() == Shape{4, 5, 1});
  // stb_image's RGB to gray: (77 r + 150 g + 29 b) >> 8.
  const int expect = (77 * pixel(0, 0, 1, 2, 0) + 150 * pixel(0, 0, 1, 2, 1) + 29 * pixel(0, 0, 1, 2, 2)) >> 8;
  CHECK(int(gx.to_vector<uint8_t>()[1 * 5 + 2]) == expect);
  data::ImageFolder keep((dir.path / "root").string(), Channels::Keep);
  CHECK(keep.get(8).x.shape() == Shape{1, 2, 1});
  CHECK(ds.identity() != keep.identity());
}

TEST_CASE("data: ImageFolder errors name the folder or file") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(data::ImageFolder(dir.file("missing")), doctest::Contains("missing' is not a directory"), Error);
  CHECK_THROWS_WITH_AS(data::ImageFolder(dir.path.string()), doctest::Contains("has no class folders"), Error);
  make_image_folder(dir.path, 2, 2, 3, 3, 1);
  fs::create_directories(dir.path / "empty_class");
  CHECK_THROWS_WITH_AS(
      data::ImageFolder(dir.path.string()),
      doctest::Contains(("class folder '" + (dir.path / "empty_class").string() + "' has no images").c_str()), Error);
  fs::remove(dir.path / "empty_class");

  SUBCASE("truncated image") {
    std::vector<uint8_t> png = read_bytes(dir.file("class_0/img_1.png"));
    png.resize(png.size() / 2);
    write_bytes(dir.file("class_0/img_1.png"), png);
    data::ImageFolder ds(dir.path.string());
    CHECK_THROWS_WITH_AS(ds.get(1),
                         doctest::Contains(("cannot decode '" + dir.file("class_0/img_1.png") + "'").c_str()), Error);
    CHECK_NOTHROW(ds.get(0));
  }
  SUBCASE("garbage image") {
    write_bytes(dir.file("class_1/img_0.png"), {'n', 'o', 't', ' ', 'p', 'n', 'g'});
    data::ImageFolder ds(dir.path.string());
    CHECK_THROWS_WITH_AS(ds.get(2), doctest::Contains("img_0.png' is not a PNG, JPEG, BMP, GIF or PNM"), Error);
  }
  SUBCASE("empty file") {
    write_bytes(dir.file("class_1/img_0.png"), {});
    data::ImageFolder ds(dir.path.string());
    CHECK_THROWS_WITH_AS(ds.get(2), doctest::Contains("img_0.png' is empty"), Error);
  }
  SUBCASE("unreadable: removed after the scan, or a dangling link") {
    data::ImageFolder ds(dir.path.string());
    fs::remove(dir.path / "class_1" / "img_1.png");
    CHECK_THROWS_WITH_AS(
        ds.get(3), doctest::Contains(("cannot open '" + dir.file("class_1/img_1.png") + "': No such file").c_str()),
        Error);
    fs::create_symlink(dir.path / "nowhere.png", dir.path / "class_1" / "img_1.png");
    CHECK_THROWS_WITH_AS(data::ImageFolder(dir.path.string()),
                         doctest::Contains(("cannot stat '" + dir.file("class_1/img_1.png") + "'").c_str()), Error);
  }
}

TEST_CASE("data: a FIFO where a dataset file is expected is refused without blocking, naming it") {
  TempDir dir;
  make_image_folder(dir.path / "images", 1, 2, 2, 2, 1);
  const std::string image = dir.file("images/class_0/x.png");
  REQUIRE(::mkfifo(image.c_str(), 0600) == 0);
  data::ImageFolder folder(dir.file("images"));
  REQUIRE(folder.path(2) == image);
  CHECK(error_without_blocking(image, [&] { folder.get(2); }).find("'" + image + "': not a regular file") !=
        std::string::npos);

  fs::create_directories(dir.path / "cifar");
  const std::string batch = dir.file("cifar/test_batch.bin");
  REQUIRE(::mkfifo(batch.c_str(), 0600) == 0);
  CHECK(error_without_blocking(batch, [&] {
          data::Cifar10Binary(dir.file("cifar"), false);
        }).find("'" + batch + "': not a regular file") != std::string::npos);

  const std::string text = dir.file("t.txt"), labels = dir.file("labels.idx");
  REQUIRE(::mkfifo(text.c_str(), 0600) == 0);
  REQUIRE(::mkfifo(labels.c_str(), 0600) == 0);
  CHECK(error_without_blocking(text, [&] { data::TextDataset(text, 4); }).find("'" + text + "': not a regular file") !=
        std::string::npos);
  CHECK(error_without_blocking(labels, [&] { data::read_idx(labels); }).find("'" + labels + "': not a regular file") !=
        std::string::npos);
}

TEST_CASE("data: Cifar10Binary reads records as HWC and rejects truncated files") {
  TempDir dir;
  std::vector<uint8_t> rec(2 * 3073);
  for (size_t r = 0; r < 2; ++r) {
    rec[r * 3073] = uint8_t(r + 3);
    for (size_t k = 0; k < 3072; ++k) rec[r * 3073 + 1 + k] = uint8_t((k / 1024) * 80 + k % 7 + r);
  }
  write_bytes(dir.file("test_batch.bin"), rec);
  data::Cifar10Binary ds(dir.path.string(), /*train=*/false);
  REQUIRE(ds.size() == 2);
  data::Sample s = ds.get(1);
  CHECK(s.y.item<int64_t>() == 4);
  CHECK(ds.label(0) == 3);
  CHECK(ds.label(1) == 4);
  CHECK_THROWS_AS(ds.label(2), Error);
  REQUIRE(s.x.shape() == Shape{32, 32, 3});
  std::vector<uint8_t> v = s.x.to_vector<uint8_t>();
  const size_t p = 5 * 32 + 9;  // pixel (5, 9): plane c holds c*80 + (c*1024 + p)%7 + 1
  for (size_t c = 0; c < 3; ++c) CHECK(v[p * 3 + c] == uint8_t(c * 80 + (c * 1024 + p) % 7 + 1));
  CHECK_THROWS_WITH_AS(data::Cifar10Binary(dir.path.string(), true),
                       doctest::Contains("data_batch_1.bin': No such file"), Error);
  rec.pop_back();
  write_bytes(dir.file("test_batch.bin"), rec);
  CHECK_THROWS_WITH_AS(data::Cifar10Binary(dir.path.string(), false),
                       doctest::Contains("not a whole number of 3073-byte records"), Error);
  rec.resize(3073);
  rec[0] = 10;
  write_bytes(dir.file("test_batch.bin"), rec);
  CHECK_THROWS_WITH_AS(data::Cifar10Binary(dir.path.string(), false), doctest::Contains("label 10 at offset 0"), Error);
}

namespace {
// CIFAR-100 records: coarse label, fine label, then planes where plane c of record r holds
// c*70 + (c*1024 + p) % 11 + r at pixel p.
std::vector<uint8_t> cifar100_records(const std::vector<std::pair<uint8_t, uint8_t>>& labels) {
  std::vector<uint8_t> b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.push_back(labels[r].first);
    b.push_back(labels[r].second);
    for (size_t k = 0; k < 3072; ++k) b.push_back(uint8_t((k / 1024) * 70 + k % 11 + r));
  }
  return b;
}
}  // namespace

TEST_CASE("data: Cifar100Binary reads fine or coarse labels and HWC images, and names its 100 and 20 classes") {
  TempDir dir;
  write_bytes(dir.file("train.bin"), cifar100_records({{4, 30}, {19, 99}, {0, 0}}));
  write_bytes(dir.file("test.bin"), cifar100_records({{7, 6}}));
  data::Cifar100Binary fine(dir.path.string(), /*train=*/true);
  REQUIRE(fine.size() == 3);
  CHECK(fine.get(0).y.item<int64_t>() == 30);
  CHECK(fine.get(1).y.item<int64_t>() == 99);
  CHECK(fine.label(2) == 0);
  data::Sample s = fine.get(1);
  REQUIRE(s.x.shape() == Shape{32, 32, 3});
  std::vector<uint8_t> v = s.x.to_vector<uint8_t>();
  const size_t p = 17 * 32 + 30;  // pixel (17, 30)
  for (size_t c = 0; c < 3; ++c) CHECK(v[p * 3 + c] == uint8_t(c * 70 + (c * 1024 + p) % 11 + 1));
  data::Cifar100Binary coarse(dir.path.string(), true, data::Cifar100Labels::Coarse);
  CHECK(coarse.get(0).y.item<int64_t>() == 4);
  CHECK(coarse.label(1) == 19);
  CHECK(coarse.get(1).x.to_vector<uint8_t>() == v);
  CHECK(coarse.identity() != fine.identity());  // a file cache must not mix the two labellings
  data::Cifar100Binary test(dir.path.string(), /*train=*/false);
  CHECK(test.size() == 1);
  CHECK(test.label(0) == 6);
  CHECK(test.identity() != fine.identity());

  REQUIRE(data::Cifar100Binary::fine_classes().size() == 100);
  REQUIRE(data::Cifar100Binary::coarse_classes().size() == 20);
  CHECK(fine.classes() == data::Cifar100Binary::fine_classes());
  CHECK(coarse.classes() == data::Cifar100Binary::coarse_classes());
  CHECK(fine.classes()[0] == "apple");
  CHECK(fine.classes()[30] == "dolphin");
  CHECK(fine.classes()[58] == "pickup_truck");
  CHECK(fine.classes()[99] == "worm");
  CHECK(coarse.classes()[4] == "fruit_and_vegetables");
  CHECK(coarse.classes()[19] == "vehicles_2");
  std::vector<std::string> sorted = fine.classes();  // the meta file lists them alphabetically
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == fine.classes());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
}

TEST_CASE("data: Cifar100Binary refuses missing, truncated and empty files and labels out of range") {
  TempDir dir;
  const std::string missing = "Cifar100Binary: cannot open '" + dir.file("train.bin") + "': No such file";
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), true), doctest::Contains(missing.c_str()), Error);
  std::vector<uint8_t> two = cifar100_records({{1, 2}, {3, 4}});
  two.pop_back();
  write_bytes(dir.file("test.bin"), two);
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), false),
                       doctest::Contains("is 6147 bytes, not a whole number of 3074-byte records (truncated at "
                                         "offset 3074?)"),
                       Error);
  // A CIFAR-10 batch (3073-byte records) is not a CIFAR-100 file.
  write_bytes(dir.file("test.bin"), std::vector<uint8_t>(3 * 3073, 0));
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), false),
                       doctest::Contains("not a whole number of 3074-byte records"), Error);
  write_bytes(dir.file("test.bin"), {});
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), false), doctest::Contains("is 0 bytes"), Error);
  write_bytes(dir.file("test.bin"), cifar100_records({{1, 2}, {20, 4}}));
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), false),
                       doctest::Contains("has coarse label 20 at offset 3074 (expected 0 to 19)"), Error);
  write_bytes(dir.file("test.bin"), cifar100_records({{1, 100}}));
  // Both labels are checked whichever is kept.
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), false, data::Cifar100Labels::Coarse),
                       doctest::Contains("has fine label 100 at offset 1 (expected 0 to 99)"), Error);
  write_bytes(dir.file("test.bin"), cifar100_records({{1, 255}}));
  CHECK_THROWS_WITH_AS(data::Cifar100Binary(dir.path.string(), false), doctest::Contains("fine label 255"), Error);
}

TEST_CASE("data: TensorDataset rows and errors") {
  Tensor x = arange(12.0).reshape({4, 3});
  Tensor y = from_vector<int64_t>({7, 8, 9, 10});
  data::TensorDataset ds(x, y);
  CHECK(ds.size() == 4);
  CHECK(ds.get(2).x.to_vector<float>() == std::vector<float>{6, 7, 8});
  CHECK(ds.get(2).y.item<int64_t>() == 9);
  data::TensorDataset other(x + 1.0, y);
  CHECK(ds.identity() != other.identity());
  CHECK_THROWS_WITH_AS(data::TensorDataset(x, from_vector<int64_t>({1, 2})),
                       doctest::Contains("x has 4 rows but y has 2"), Error);
  CHECK_THROWS_WITH_AS(ds.get(4), doctest::Contains("index 4 out of range"), Error);
}

TEST_CASE("data: TextDataset tokenises UTF-8 characters into context windows") {
  TempDir dir;
  const std::string text = "abé ça\xF0\x9F\x98\x80"
                           "ab";  // é, ç: 2 bytes; U+1F600: 4 bytes
  write_bytes(dir.file("t.txt"), std::vector<uint8_t>(text.begin(), text.end()));
  data::TextDataset ds(dir.file("t.txt"), 3);
  // Characters: a b é ' ' ç a 😀 a b (9); vocabulary sorted by code point: ' ' a b ç é 😀.
  CHECK(ds.vocab_size() == 6);
  CHECK(ds.tokens() == std::vector<int64_t>{1, 2, 4, 0, 3, 1, 5, 1, 2});
  CHECK(ds.size() == 6);
  data::Sample s = ds.get(4);
  CHECK(s.x.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 5});
  CHECK(s.y.to_vector<int64_t>() == std::vector<int64_t>{1, 5, 1});
  CHECK(ds.decode(ds.encode("çé😀")) == "çé😀");
  CHECK_THROWS_WITH_AS(ds.encode("z"), doctest::Contains("not in the vocabulary"), Error);

  const std::string bad = "ok\xC3(";
  write_bytes(dir.file("bad.txt"), std::vector<uint8_t>(bad.begin(), bad.end()));
  CHECK_THROWS_WITH_AS(data::TextDataset(dir.file("bad.txt"), 1), doctest::Contains("not valid UTF-8 at byte offset 2"),
                       Error);
  CHECK_THROWS_WITH_AS(data::TextDataset(dir.file("t.txt"), 9), doctest::Contains("not more than the context length 9"),
                       Error);
}

TEST_CASE("data: exporting Fashion-MNIST to PNGs round-trips through ImageFolder byte-exactly") {
  TempDir dir;
  data::FashionMNIST train;
  const int64_t n = data::export_image_folder(train, dir.path.string(), data::FashionMNIST::classes(),
                                              {.limit = 40, .threads = 3});
  REQUIRE(n == 40);
  data::ImageFolder png(dir.path.string(), Channels::Gray);
  REQUIRE(png.size() == 40);
  CHECK(png.classes().front() == "0_T-shirt_top");
  CHECK(png.classes().back() == "9_Ankle_boot");
  // ImageFolder orders by class, then by file name (the zero-padded original index).
  std::vector<int64_t> expected;
  for (int64_t c = 0; c < 10; ++c)
    for (int64_t i = 0; i < 40; ++i)
      if (train.label(i) == c) expected.push_back(i);
  REQUIRE(expected.size() == 40);
  for (int64_t k = 0; k < 40; ++k) {
    data::Sample s = png.get(k);
    const int64_t i = expected[size_t(k)];
    std::string file(i < 10 ? "0" : "");
    file += std::to_string(i);
    file += ".png";
    CHECK(png.path(k).substr(png.path(k).size() - 6) == file);
    CHECK(s.y.item<int64_t>() == train.label(i));
    CHECK(s.x.to_vector<uint8_t>() == train.get(i).x.to_vector<uint8_t>());
  }
  TempDir other;
  CHECK_THROWS_WITH_AS(data::export_image_folder(train, other.path.string(), {"only", "two"}, {.limit = 5}),
                       doctest::Contains("has label 9 but only 2 class names were given"), Error);
  // A second export into the same root would mix with the first (6 files and 06.png beside 6.png).
  CHECK_THROWS_WITH_AS(data::export_image_folder(train, dir.path.string(), data::FashionMNIST::classes(), {.limit = 6}),
                       doctest::Contains(("'" + dir.path.string() + "' is not empty").c_str()), Error);
  CHECK(data::ImageFolder(dir.path.string(), Channels::Gray).size() == 40);
}

TEST_CASE("data: Subset is the first n samples, its identity names n, out-of-range indices and n < 0 are refused") {
  auto base = std::make_shared<data::TensorDataset>(arange(10.0).reshape({10, 1}), arange(10.0, kI64));
  data::Subset first(base, 4);
  CHECK(first.size() == 4);
  CHECK(first.get(3).y.item<int64_t>() == 3);
  CHECK(first.get(3).x.item<float>() == 3.0f);
  CHECK(first.identity() == base->identity() + "|first 4");
  CHECK(data::Subset(base, 100).size() == 10);  // all of a smaller dataset
  CHECK(data::Subset(base, 0).size() == 0);
  CHECK_THROWS_AS(first.get(4), Error);
  CHECK_THROWS_WITH_AS(data::Subset(base, -1), doctest::Contains("must be >= 0, got -1"), Error);
  CHECK_THROWS_WITH_AS(data::Subset(nullptr, 1), doctest::Contains("Subset: no dataset"), Error);
}

TEST_CASE("data: Subset and the default Dataset::label read the label of a sample") {
  auto base = std::make_shared<data::TensorDataset>(arange(6.0).reshape({6, 1}),
                                                    from_vector<int64_t>({5, 4, 3, 2, 1, 0}));
  CHECK(base->label(1) == 4);  // the default: get(1).y
  data::Subset first(base, 3);
  CHECK(first.label(2) == 3);
  CHECK_THROWS_AS(first.label(3), Error);
  // A target that is not one integer has no label.
  data::TensorDataset rows(arange(4.0).reshape({2, 2}), arange(4.0).reshape({2, 2}));
  CHECK_THROWS_WITH_AS(rows.label(0), doctest::Contains("has no class label (its target is f32"), Error);
}

namespace {
// Labels kept in memory, images made on request; counts get() calls.
class LabelsOnly : public data::Dataset {
 public:
  explicit LabelsOnly(std::vector<int64_t> labels) : labels_(std::move(labels)) {}
  int64_t size() const override { return int64_t(labels_.size()); }
  data::Sample get(int64_t i) const override {
    ++gets;
    return {full({1}, double(i)), data::label_tensor(labels_[size_t(i)])};
  }
  int64_t label(int64_t i) const override { return labels_[size_t(i)]; }
  std::string identity() const override { return "LabelsOnly"; }
  mutable std::atomic<int64_t> gets{0};

 private:
  std::vector<int64_t> labels_;
};
}  // namespace

TEST_CASE("data: ClassSubset keeps the given classes in the base's order, relabelled in the order given") {
  auto base = std::make_shared<LabelsOnly>(std::vector<int64_t>{0, 3, 1, 5, 3, 0, 2, 5, 3});
  data::ClassSubset sub(base, {3, 0});
  CHECK(base->gets == 0);  // the samples were found through label(), no sample was made
  REQUIRE(sub.size() == 5);
  const std::vector<int64_t> base_index = {0, 1, 4, 5, 8}, label = {1, 0, 0, 1, 0};
  for (int64_t i = 0; i < sub.size(); ++i) {
    CAPTURE(i);
    CHECK(sub.base_index(i) == base_index[size_t(i)]);
    CHECK(sub.label(i) == label[size_t(i)]);
    data::Sample s = sub.get(i);
    CHECK(s.x.item<float>() == float(base_index[size_t(i)]));
    CHECK(s.y.dtype() == kI64);
    CHECK(s.y.item<int64_t>() == label[size_t(i)]);
  }
  CHECK(sub.classes() == std::vector<int64_t>{3, 0});
  CHECK(sub.identity() == "LabelsOnly|classes 3,0");
  CHECK(data::ClassSubset(base, {0, 3}).identity() != sub.identity());  // other labels: other data
  CHECK(data::ClassSubset(base, {5}).size() == 2);
  CHECK_THROWS_AS(sub.get(5), Error);
  CHECK_THROWS_AS(sub.label(-1), Error);

  CHECK_THROWS_WITH_AS(data::ClassSubset(base, {}), doctest::Contains("ClassSubset: no classes given"), Error);
  CHECK_THROWS_WITH_AS(data::ClassSubset(base, {3, 1, 3}), doctest::Contains("class 3 is given twice"), Error);
  CHECK_THROWS_WITH_AS(data::ClassSubset(base, {-1}), doctest::Contains("class -1 is negative"), Error);
  CHECK_THROWS_WITH_AS(data::ClassSubset(base, {1, 4}), doctest::Contains("class 4 has no samples in LabelsOnly"),
                       Error);
  CHECK_THROWS_WITH_AS(data::ClassSubset(nullptr, {1}), doctest::Contains("ClassSubset: no dataset"), Error);
}

TEST_CASE("data: ClassSubset over an ImageFolder and CIFAR-10 reads stored labels, and batches carry the new ones") {
  TempDir dir;
  make_image_folder(dir.path / "images", 4, 3, 4, 4, 1);
  auto folder = std::make_shared<data::ImageFolder>((dir.path / "images").string(), Channels::Gray);
  data::ClassSubset two(folder, {2, 1});
  REQUIRE(two.size() == 6);
  CHECK(two.label(0) == 1);  // class_1's images come first in the folder's order, labelled 1
  CHECK(two.label(3) == 0);
  CHECK(two.get(3).x.to_vector<uint8_t>()[0] == pixel(2, 0, 0, 0, 0));
  data::DataLoader loader(two, {.batch_size = 4, .transform = std::make_shared<data::ToTensor>()});
  Epoch e = run_epoch(loader);
  REQUIRE(e.y.size() == 2);
  CHECK(e.y[0] == std::vector<int64_t>{1, 1, 1, 0});
  CHECK(e.y[1] == std::vector<int64_t>{0, 0});

  std::vector<uint8_t> rec(4 * 3073, 0);
  for (size_t r = 0; r < 4; ++r) rec[r * 3073] = uint8_t(9 - r), rec[r * 3073 + 1] = uint8_t(r);
  write_bytes(dir.file("test_batch.bin"), rec);
  auto cifar = std::make_shared<data::Cifar10Binary>(dir.path.string(), false);
  data::ClassSubset pick(cifar, {6, 9});
  REQUIRE(pick.size() == 2);
  CHECK(pick.get(0).x.to_vector<uint8_t>()[0] == 0);  // record 0, label 9
  CHECK(pick.label(0) == 1);
  CHECK(pick.get(1).x.to_vector<uint8_t>()[0] == 3);  // record 3, label 6
  CHECK(pick.label(1) == 0);
}
