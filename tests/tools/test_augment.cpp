// mdl-train's --augment (random crop and flip on training images only, after the cache) and
// --subset on data stored class by class (an ImageFolder: samples spread over it, not a prefix).
#include <doctest/doctest.h>

#include <set>

#include "data/subset.h"
#include "data/tensor_dataset.h"
#include "tests/support/data_test_util.h"
#include "tools/mdl_train/options.h"
#include "tools/mdl_train/setup.h"

using namespace mdl;

TEST_CASE("mdl-train --augment: parsed, refused for text, and named in the help") {
  CHECK_FALSE(train::parse_train_options(std::vector<std::string>{}).augment);
  CHECK(train::parse_train_options({"--augment"}).augment);
  CHECK_THROWS_WITH_AS(train::parse_train_options({"--augment=1"}), doctest::Contains("--augment takes no value"),
                       train::UsageError);
  CHECK_THROWS_WITH_AS(train::parse_train_options({"--model", "gpt", "--data", "text:/tmp/a.txt", "--augment"}),
                       doctest::Contains("--augment crops and flips images"), train::UsageError);
  CHECK(train::usage().find("--augment") != std::string::npos);
}

TEST_CASE("mdl-train --augment: the training loader crops and flips, the validation loader does not") {
  data_test::TempDir dir("augment");
  data_test::make_image_folder(dir.path / "train", 2, 4, 16, 16, 1);
  data_test::make_image_folder(dir.path / "test", 2, 2, 16, 16, 1);
  train::TrainOptions o;
  o.data = "imagefolder:" + dir.path.string();
  o.batch = 8;

  const train::DataBundle plain = train::make_data(o);
  CHECK(plain.train_transform == plain.transform);
  CHECK(plain.description.find("augmented") == std::string::npos);

  o.augment = true;
  const train::DataBundle d = train::make_data(o);
  CHECK(d.description.find("augmented") != std::string::npos);
  REQUIRE(d.train_transform);
  CHECK(d.train_transform->is_random());
  CHECK_FALSE(d.transform->is_random());
  const data::LoaderOptions lo = train::make_loader_options(o, d);
  CHECK(lo.transform == d.train_transform);
  const auto val = train::make_validation_loader(o, d, lo);
  REQUIRE(val);
  CHECK(val->options().transform == d.transform);

  // The augmented image keeps its shape and values from the plain one (a shifted, maybe mirrored
  // window of it, zero-padded: Normalize maps pixel 0 to -1), and differs from it for some sample.
  const Tensor x = d.train->get(0).x;
  const Tensor plain_x = d.transform->apply(x);
  bool any_differs = false;
  for (int64_t i = 0; i < d.train->size(); ++i) {
    Generator g(uint64_t(100 + i));
    const Tensor xi = d.train->get(i).x;
    const Tensor a = (*d.train_transform)(xi, g), p = d.transform->apply(xi);
    CHECK(a.shape() == p.shape());
    std::multiset<float> plain_values;
    for (float v : p.to_vector<float>()) plain_values.insert(v);
    for (float v : a.to_vector<float>())
      CHECK((v == -1.0f || plain_values.count(v) > 0));  // a padding zero, or a pixel of the image
    any_differs = any_differs || a.to_vector<float>() != p.to_vector<float>();
  }
  CHECK(any_differs);
  CHECK(plain_x.shape() == Shape{d.channels, 16, 16});
}

TEST_CASE("data: Subset spread takes n samples evenly over the base, so data stored class by class keeps its classes") {
  auto base = std::make_shared<data::TensorDataset>(arange(10.0).reshape({10, 1}), arange(10.0, kI64));
  data::Subset spread(base, 4, data::Subset::Pick::Spread);
  REQUIRE(spread.size() == 4);
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < 4; ++i) picked.push_back(spread.get(i).y.item<int64_t>());
  CHECK(picked == std::vector<int64_t>{0, 2, 5, 7});  // floor(i * 10 / 4)
  for (int64_t i = 0; i < 4; ++i) CHECK(spread.label(i) == picked[size_t(i)]);
  CHECK(spread.identity() == base->identity() + "|spread 4");
  CHECK(spread.identity() != data::Subset(base, 4).identity());
  CHECK(data::Subset(base, 10, data::Subset::Pick::Spread).get(9).y.item<int64_t>() == 9);
  CHECK(data::Subset(base, 1, data::Subset::Pick::Spread).get(0).y.item<int64_t>() == 0);
  CHECK_THROWS_AS(spread.get(4), Error);
  CHECK_THROWS_AS(spread.get(-1), Error);

  // mdl-train --subset on an ImageFolder (its samples class by class): every class is present.
  data_test::TempDir dir("subset_spread");
  data_test::make_image_folder(dir.path, 4, 5, 8, 8, 1);
  train::TrainOptions o;
  o.data = "imagefolder:" + dir.path.string();
  o.subset = 8;
  const train::DataBundle d = train::make_data(o);
  REQUIRE(d.train->size() == 8);
  std::set<int64_t> classes;
  for (int64_t i = 0; i < d.train->size(); ++i) classes.insert(d.train->get(i).y.item<int64_t>());
  CHECK(classes.size() == 4);
}
