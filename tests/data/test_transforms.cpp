// Transforms against plain reference loops: ToTensor (f32, f16, bf16), Normalize, RandomCrop,
// RandomHorizontalFlip, CenterCrop, Resize, Compose; per-sample generators reproduce; bad input
// throws naming the transform.
#include <doctest/doctest.h>

#include <set>

#include "data/transforms.h"
#include "mdl.h"

using namespace mdl;
using namespace mdl::data;

namespace {
// u8 (H, W, C) with value (y * 16 + x) * C + c + 1 (never 0, so zero padding is visible).
Tensor test_image(int64_t h, int64_t w, int64_t c) {
  Tensor t = make_tensor({h, w, c}, kU8, Device::cpu());
  for (int64_t i = 0; i < h * w * c; ++i)
    t.data_ptr<uint8_t>()[i] = uint8_t(((i / c / w) * 16 + (i / c) % w) * c + i % c + 1);
  return t;
}
uint8_t at(const Tensor& hwc, int64_t y, int64_t x, int64_t c) {
  return hwc.data_ptr<uint8_t>()[(y * hwc.size(1) + x) * hwc.size(2) + c];
}
}  // namespace

TEST_CASE("data: ToTensor turns u8 HWC into CHW scaled to [0, 1]") {
  Tensor img = test_image(3, 4, 2);
  Tensor t = ToTensor().apply(img);
  REQUIRE(t.shape() == Shape{2, 3, 4});
  CHECK(t.dtype() == kF32);
  std::vector<float> v = t.to_vector<float>();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x) CHECK(v[size_t((c * 3 + y) * 4 + x)] == float(at(img, y, x, c)) / 255.0f);
  Tensor h = ToTensor(kF16).apply(img);
  CHECK(h.dtype() == kF16);
  CHECK(allclose(h.to(kF32), t, 1e-3, 1e-3));
  CHECK(ToTensor(kBF16).apply(img).dtype() == kBF16);
  Tensor hw = full({2, 2}, 255.0, kU8);
  CHECK(ToTensor().apply(hw).shape() == Shape{1, 2, 2});
  CHECK(ToTensor().apply(hw).to_vector<float>() == std::vector<float>{1, 1, 1, 1});
  CHECK_THROWS_WITH_AS(ToTensor().apply(t), doctest::Contains("ToTensor: expected a u8 (H, W[, C]) image, got f32"),
                       Error);
  CHECK_THROWS_WITH_AS(ToTensor{kI64}, doctest::Contains("must be f32, f16 or bf16"), Error);
}

TEST_CASE("data: Normalize subtracts the mean and divides by std per channel") {
  Tensor x = ToTensor().apply(test_image(2, 2, 3));
  Tensor n = Normalize({0.5, 0.25, 0.0}, {0.5, 2.0, 1.0}).apply(x);
  std::vector<float> xv = x.to_vector<float>(), nv = n.to_vector<float>();
  const double mean[3] = {0.5, 0.25, 0.0}, sd[3] = {0.5, 2.0, 1.0};
  for (size_t i = 0; i < xv.size(); ++i)
    CHECK(nv[i] == doctest::Approx((xv[i] - mean[i / 4]) / sd[i / 4]).epsilon(1e-6));
  CHECK(x.to_vector<float>() == xv);  // input untouched
  Tensor one = Normalize({0.5}, {0.5}).apply(x);
  CHECK(one.to_vector<float>()[5] == doctest::Approx((xv[5] - 0.5) / 0.5));
  CHECK_THROWS_WITH_AS(Normalize({0.5, 0.5}, {1, 1}).apply(x),
                       doctest::Contains("2 means for an image with 3 channels"), Error);
  CHECK_THROWS_WITH_AS(Normalize({0.5}, {0.0}), doctest::Contains("std must be finite and nonzero"), Error);
  CHECK_THROWS_WITH_AS(Normalize({0.5}, {1.0}).apply(test_image(2, 2, 1)), doctest::Contains("apply ToTensor first"),
                       Error);
}

TEST_CASE("data: RandomCrop with padding matches a padded-window reference and covers every offset") {
  Tensor img = test_image(5, 6, 2);
  RandomCrop crop(4, 2);
  std::set<std::pair<int, int>> offsets;
  for (int64_t index = 0; index < 400; ++index) {
    Generator g = sample_generator(7, 0, index);
    Tensor out = crop(img, g);
    REQUIRE(out.shape() == Shape{4, 4, 2});
    // Recover (top, left) from the same draws, then check every element against the reference.
    Generator again = sample_generator(7, 0, index);
    const int64_t top = int64_t(again.next_u64() % 6) - 2, left = int64_t(again.next_u64() % 7) - 2;
    offsets.insert({int(top), int(left)});
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t x = 0; x < 4; ++x)
        for (int64_t c = 0; c < 2; ++c) {
          const int64_t sy = top + y, sx = left + x;
          const uint8_t expect = (sy < 0 || sy >= 5 || sx < 0 || sx >= 6) ? 0 : at(img, sy, sx, c);
          REQUIRE(at(out, y, x, c) == expect);
        }
  }
  CHECK(offsets.size() == 6 * 7);
  // Floating CHW works the same way.
  Tensor f = ToTensor().apply(img);
  Generator g1 = sample_generator(7, 0, 3), g2 = sample_generator(7, 0, 3);
  CHECK(allclose(crop(f, g1), ToTensor().apply(crop(img, g2))));
  CHECK_THROWS_WITH_AS(RandomCrop(10, 1).apply(img),
                       doctest::Contains("10x10 window does not fit an image of 5x6 padded by 1"), Error);
}

// torchvision's center_crop: top = round((H - h) / 2) with halves to even when the image is taller,
// top = -((h - H) // 2) when it is shorter (padded (h - H) // 2 rows above). Rows hold row + 1.
TEST_CASE("data: CenterCrop places its window as torchvision does for odd differences") {
  struct Case {
    int64_t H, h, top;
  };
  for (const Case c : {Case{5, 4, 0}, Case{9, 4, 2}, Case{33, 32, 0}, Case{7, 4, 2}, Case{6, 4, 1}, Case{3, 4, 0},
                       Case{2, 5, -1}, Case{3, 6, -1}, Case{3, 7, -2}}) {
    CAPTURE(c.H);
    CAPTURE(c.h);
    Tensor column = make_tensor({c.H, 1, 1}, kU8, Device::cpu());
    for (int64_t y = 0; y < c.H; ++y) column.data_ptr<uint8_t>()[y] = uint8_t(y + 1);
    const std::vector<uint8_t> rows = CenterCrop(c.h, 1).apply(column).to_vector<uint8_t>();
    REQUIRE(rows.size() == size_t(c.h));
    for (int64_t y = 0; y < c.h; ++y) {
      const int64_t src = c.top + y;
      CHECK(int(rows[size_t(y)]) == (src >= 0 && src < c.H ? int(src + 1) : 0));
    }
  }
}

TEST_CASE("data: RandomHorizontalFlip mirrors about half the time; CenterCrop; Resize") {
  Tensor img = test_image(3, 5, 3);
  RandomHorizontalFlip flip;
  int flipped = 0;
  for (int64_t index = 0; index < 200; ++index) {
    Generator g = sample_generator(1, 2, index);
    Tensor out = flip(img, g);
    const bool mirrored = at(out, 0, 0, 0) != at(img, 0, 0, 0);
    flipped += mirrored;
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 5; ++x)
        for (int64_t c = 0; c < 3; ++c) REQUIRE(at(out, y, x, c) == at(img, y, mirrored ? 4 - x : x, c));
  }
  CHECK(flipped > 70);
  CHECK(flipped < 130);
  CHECK(RandomHorizontalFlip(1.0).apply(img).to_vector<uint8_t>() != img.to_vector<uint8_t>());
  CHECK(RandomHorizontalFlip(0.0).apply(img).to_vector<uint8_t>() == img.to_vector<uint8_t>());

  Tensor cc = CenterCrop(1, 3).apply(img);  // rows [1, 2), cols [1, 4)
  REQUIRE(cc.shape() == Shape{1, 3, 3});
  for (int64_t x = 0; x < 3; ++x) CHECK(at(cc, 0, x, 2) == at(img, 1, x + 1, 2));
  Tensor big = CenterCrop(5, 5).apply(img);  // one zero row above and below
  CHECK(at(big, 0, 2, 0) == 0);
  CHECK(at(big, 1, 2, 0) == at(img, 0, 2, 0));

  Tensor flat = full({4, 6, 3}, 77.0, kU8);
  Tensor r = Resize(2, 3).apply(flat);
  REQUIRE(r.shape() == Shape{2, 3, 3});
  for (uint8_t v : r.to_vector<uint8_t>()) CHECK(v == 77);
  Tensor rf = Resize(8, 12).apply(ToTensor().apply(flat));
  REQUIRE(rf.shape() == Shape{3, 8, 12});
  for (float v : rf.to_vector<float>()) CHECK(v == doctest::Approx(77.0 / 255.0).epsilon(1e-5));
  // Down-sampling a 4x4 checkerboard of 0 and 200 (stb's Mitchell filter) gives grays near the
  // mean, 100, symmetric about the diagonal.
  Tensor board = make_tensor({4, 4, 1}, kU8, Device::cpu());
  for (int i = 0; i < 16; ++i) board.data_ptr<uint8_t>()[i] = ((i / 4 + i % 4) % 2) ? 200 : 0;
  std::vector<uint8_t> down = Resize(2, 2).apply(board).to_vector<uint8_t>();
  CHECK(down[0] == down[3]);
  CHECK(down[1] == down[2]);
  for (uint8_t v : down) CHECK(std::abs(int(v) - 100) <= 10);
  CHECK_THROWS_WITH_AS(Resize(2, 2).apply(ToTensor(kF16).apply(flat)), doctest::Contains("Resize: supports u8"), Error);
  CHECK_THROWS_WITH_AS(Resize(0, 2), doctest::Contains("size must be positive"), Error);
}

TEST_CASE("data: Compose applies in order, reports randomness, and reproduces per-sample draws") {
  auto pipeline = std::make_shared<Compose>(std::vector<TransformPtr>{
      std::make_shared<RandomCrop>(4, 1), std::make_shared<RandomHorizontalFlip>(), std::make_shared<ToTensor>(),
      std::make_shared<Normalize>(std::vector<double>{0.5}, std::vector<double>{0.25})});
  CHECK(pipeline->is_random());
  CHECK(pipeline->name() == "Compose(RandomCrop(4,1),RandomHorizontalFlip(0.5),ToTensor(f32),Normalize(0.5;0.25))");
  // The name keys the file cache: parameters that differ in the 7th digit name different caches.
  CHECK(Normalize({0.1234567}, {1.0}).name() != Normalize({0.1234568}, {1.0}).name());
  CHECK(RandomHorizontalFlip(0.3333333).name() != RandomHorizontalFlip(0.3333334).name());
  CHECK_FALSE(Compose({std::make_shared<Resize>(4, 4), std::make_shared<ToTensor>()}).is_random());
  Tensor img = test_image(5, 5, 1);
  Generator a = sample_generator(3, 1, 10), b = sample_generator(3, 1, 10);
  Tensor ya = (*pipeline)(img, a), yb = (*pipeline)(img, b);
  CHECK(ya.shape() == Shape{1, 4, 4});
  CHECK(ya.to_vector<float>() == yb.to_vector<float>());
  bool any_differs = false;
  for (int64_t e = 2; e < 10 && !any_differs; ++e) {
    Generator g = sample_generator(3, e, 10);
    any_differs = (*pipeline)(img, g).to_vector<float>() != ya.to_vector<float>();
  }
  CHECK(any_differs);
  // Manual composition gives the same result.
  Generator m = sample_generator(3, 1, 10);
  Tensor manual = RandomCrop(4, 1)(img, m);
  manual = RandomHorizontalFlip()(manual, m);
  manual = Normalize({0.5}, {0.25}).apply(ToTensor().apply(manual));
  CHECK(manual.to_vector<float>() == ya.to_vector<float>());
  CHECK_THROWS_WITH_AS(Compose({nullptr}), doctest::Contains("null transform"), Error);
}
