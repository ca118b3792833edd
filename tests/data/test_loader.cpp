// DataLoader: batches equal a plain reference built from (seed, epoch, index), for 0, 1 and 4
// workers, with and without memory and file caches; cache hits from the second epoch; a file
// cache written by another process is reused and rebuilt when the source changes; back-pressure;
// early break, destruction mid-epoch and worker exceptions shut down cleanly; on_error = Skip;
// statistics; bad options.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "data/image_folder.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/pinned.h"
#include "data/text.h"
#include "tests/support/data_test_util.h"
#include "mdl.h"

extern char** environ;

using namespace mdl;
using namespace data_test;
using data::Cache;
using data::DataLoader;

namespace {

// Counts get() calls (and can slow them down) around another dataset.
class Counting : public data::Dataset {
 public:
  explicit Counting(const data::Dataset& inner, int sleep_us = 0) : inner_(inner), sleep_us_(sleep_us) {}
  int64_t size() const override { return inner_.size(); }
  data::Sample get(int64_t i) const override {
    ++gets;
    if (sleep_us_) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    return inner_.get(i);
  }
  std::string identity() const override { return inner_.identity(); }
  mutable std::atomic<int64_t> gets{0};

 private:
  const data::Dataset& inner_;
  int sleep_us_;
};

data::TransformPtr augment() {
  return std::make_shared<data::Compose>(std::vector<data::TransformPtr>{std::make_shared<data::RandomCrop>(4, 1),
                                                                         std::make_shared<data::RandomHorizontalFlip>(),
                                                                         std::make_shared<data::ToTensor>()});
}

// The batches a loader must produce, computed without it.
Epoch reference_epoch(const data::Dataset& ds, const DataLoader& loader, int64_t epoch, const data::Transform& t) {
  Epoch e;
  const std::vector<int64_t> order = loader.epoch_order(epoch);
  const int64_t b = loader.options().batch_size;
  for (int64_t first = 0; first < int64_t(order.size()); first += b) {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int64_t k = first; k < std::min<int64_t>(first + b, int64_t(order.size())); ++k) {
      data::Sample s = ds.get(order[size_t(k)]);
      Generator g = data::sample_generator(loader.seed(), epoch, order[size_t(k)]);
      std::vector<float> v = t(s.x, g).to_vector<float>();
      x.insert(x.end(), v.begin(), v.end());
      y.push_back(s.y.item<int64_t>());
    }
    e.x.push_back(x);
    e.y.push_back(y);
  }
  return e;
}

int run_child(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("data: loader batches match the reference for 0, 1 and 4 workers, with and without cache") {
  TempDir dir;
  make_image_folder(dir.path / "images", 3, 10, 6, 6, 3);
  data::ImageFolder ds((dir.path / "images").string());
  data::TransformPtr t = augment();
  std::optional<Epoch> ref[2];
  for (Cache cache : {Cache::None, Cache::Memory, Cache::File})
    for (int workers : {0, 1, 4}) {
      CAPTURE(int(cache));
      CAPTURE(workers);
      DataLoader loader(ds, {.batch_size = 4,
                             .shuffle = true,
                             .num_workers = workers,
                             .prefetch = 2,
                             .cache = cache,
                             .cache_dir = (dir.path / "cache").string(),
                             .seed = 11,
                             .transform = t});
      CHECK(loader.size() == 8);
      for (int epoch = 0; epoch < 2; ++epoch) {
        Epoch got = run_epoch(loader);
        if (!ref[epoch]) {
          ref[epoch] = reference_epoch(ds, loader, epoch, *t);
          REQUIRE(ref[epoch]->x.size() == 8);
          CHECK(ref[epoch]->y.back().size() == 2);  // 30 = 7 * 4 + 2
        }
        CHECK(got == *ref[epoch]);
      }
    }
  CHECK(ref[0]->y != ref[1]->y);  // a new order each epoch
}

TEST_CASE("data: memory cache serves every sample from the second epoch on") {
  TempDir dir;
  make_image_folder(dir.path, 2, 8, 5, 5, 1);
  data::ImageFolder images(dir.path.string());
  Counting ds(images);
  DataLoader loader(ds, {.batch_size = 5, .shuffle = true, .num_workers = 2, .cache = Cache::Memory});
  Epoch first = run_epoch(loader);
  data::LoaderStats s = loader.stats();
  CHECK(ds.gets == 16);
  CHECK(s.cache_misses == 16);
  CHECK(s.cache_hits == 0);
  CHECK(s.bytes_read > 0);
  const int64_t bytes_first = s.bytes_read;
  for (int epoch = 1; epoch < 3; ++epoch) run_epoch(loader);
  s = loader.stats();
  CHECK(ds.gets == 16);
  CHECK(s.cache_hits == 32);
  CHECK(s.cache_misses == 16);
  CHECK(s.bytes_read == bytes_first);  // nothing read from disk after the first epoch
  CHECK(s.epochs == 3);
  CHECK(s.batches == 12);
  CHECK(s.samples == 48);
  // Without a transform, u8 images come out as f32 (B, C, H, W) in [0, 1].
  DataLoader plain(images, {.batch_size = 4});
  auto it = plain.begin();
  CHECK(it->x.shape() == Shape{4, 3, 5, 5});  // ImageFolder converts to RGB by default
  CHECK(it->x.dtype() == kF32);
  CHECK(it->x.to_vector<float>()[1] == float(pixel(0, 0, 0, 1, 0)) / 255.0f);
  CHECK(it->y.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0});
}

// Run only by the next test, in a separate process: builds the file cache and exits.
TEST_CASE("data: file cache writer (child process)" * doctest::skip()) {
  const char* root = std::getenv("MDL_TEST_DATA_ROOT");
  REQUIRE(root != nullptr);
  data::ImageFolder ds((fs::path(root) / "images").string());
  DataLoader loader(ds, {.batch_size = 3,
                         .num_workers = 2,
                         .cache = Cache::File,
                         .cache_dir = (fs::path(root) / "cache").string(),
                         .before_cache = std::make_shared<data::Resize>(4, 4)});
  run_epoch(loader);
  REQUIRE(loader.stats().cache_misses == ds.size());
}

TEST_CASE("data: file cache built by another process is reused, and rebuilt when the source changes") {
  TempDir dir;
  make_image_folder(dir.path / "images", 2, 5, 6, 6, 3);
  ::setenv("MDL_TEST_DATA_ROOT", dir.path.c_str(), 1);
  const int rc = run_child({"mdl_tests", "--no-skip=true", "--test-case=data: file cache writer (child process)"});
  ::unsetenv("MDL_TEST_DATA_ROOT");
  REQUIRE(rc == 0);
  int cache_files = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "cache")) cache_files += e.path().extension() == ".mdlcache";
  REQUIRE(cache_files == 1);

  const data::LoaderOptions opt{.batch_size = 3,
                                .num_workers = 2,
                                .cache = Cache::File,
                                .cache_dir = (dir.path / "cache").string(),
                                .before_cache = std::make_shared<data::Resize>(4, 4)};
  data::ImageFolder images((dir.path / "images").string());
  Counting ds(images);
  {
    DataLoader loader(ds, opt);
    Epoch e = run_epoch(loader);
    data::LoaderStats s = loader.stats();
    CHECK(s.file_cache_reused);
    CHECK(s.cache_hits == 10);
    CHECK(s.cache_misses == 0);
    CHECK(ds.gets == 0);  // not one image decoded in this process
    DataLoader fresh(images, {.batch_size = 3, .before_cache = std::make_shared<data::Resize>(4, 4)});
    CHECK(e == run_epoch(fresh));
  }
  SUBCASE("a different before_cache transform gets its own cache") {
    data::LoaderOptions other = opt;
    other.before_cache = std::make_shared<data::Resize>(5, 5);
    DataLoader loader(ds, other);
    CHECK_FALSE(loader.stats().file_cache_reused);
    run_epoch(loader);
    CHECK(ds.gets == 10);
  }
  SUBCASE("a changed image changes the key") {
    Tensor img = full({6, 6, 3}, 9.0, kU8);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    data::write_png((dir.path / "images" / "class_1" / "img_0.png").string(), img);
    data::ImageFolder changed((dir.path / "images").string());
    CHECK(changed.identity() != images.identity());
    DataLoader loader(changed, opt);
    CHECK_FALSE(loader.stats().file_cache_reused);
    Epoch e = run_epoch(loader);
    CHECK(loader.stats().cache_misses == 10);
    CHECK(e.x[1][2 * 48] ==
          doctest::Approx(9.0 / 255.0));  // sample 5 = class_1/img_0: batch 1, third of 3x4x4 values each
  }
  SUBCASE("a damaged cache file is rebuilt, not trusted") {
    for (const auto& e : fs::directory_iterator(dir.path / "cache"))
      fs::resize_file(e.path(), fs::file_size(e.path()) - 3);
    DataLoader loader(ds, opt);
    CHECK_FALSE(loader.stats().file_cache_reused);
    run_epoch(loader);
    CHECK(loader.stats().cache_misses == 10);
  }
}

TEST_CASE("data: prefetch bounds the work done ahead of the consumer") {
  TempDir dir;
  make_image_folder(dir.path, 1, 12, 3, 3, 1);
  data::ImageFolder images(dir.path.string());
  for (int prefetch : {0, 2}) {
    CAPTURE(prefetch);
    Counting ds(images);
    DataLoader loader(ds, {.batch_size = 1, .num_workers = 3, .prefetch = prefetch});
    auto it = loader.begin();  // batch 0 taken; batches 1..prefetch may be prepared
    for (int i = 0; i < 5000 && ds.gets < 1 + prefetch; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK(ds.gets == 1 + prefetch);
    ++it;
    for (int i = 0; i < 5000 && ds.gets < 2 + prefetch; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK(ds.gets == 2 + prefetch);
  }
}

TEST_CASE("data: early break and destruction mid-epoch stop the workers") {
  TempDir dir;
  make_image_folder(dir.path, 2, 20, 4, 4, 1);
  data::ImageFolder images(dir.path.string());
  Counting ds(images, /*sleep_us=*/500);
  {
    DataLoader loader(ds, {.batch_size = 2, .num_workers = 4, .prefetch = 4});
    int seen = 0;
    for (auto& batch : loader) {
      CHECK(batch.x.size(0) == 2);
      if (++seen == 3) break;
    }
    const int64_t after_break = ds.gets;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CHECK(ds.gets == after_break);  // nobody is loading any more
    CHECK(after_break <= 2 * (3 + 4));
    CHECK(loader.stats().epochs == 1);
    // The next epoch starts from the beginning.
    CHECK(run_epoch(loader).y.size() == 20);
  }
  {
    auto loader = std::make_unique<DataLoader>(ds,
                                               data::LoaderOptions{.batch_size = 2, .num_workers = 3, .prefetch = 8});
    {
      auto it = loader->begin();
      ++it;
    }
    loader.reset();  // workers were blocked on back-pressure or loading
  }
  {
    DataLoader loader(ds, {.batch_size = 2, .num_workers = 2});
    auto it = loader.begin();
    auto again = loader.begin();  // a new epoch stops the old one
    CHECK(it == std::default_sentinel);
    CHECK_FALSE(again == std::default_sentinel);
    CHECK_THROWS_WITH_AS(++it, doctest::Contains("another begin() started a new epoch"), Error);
  }
}

TEST_CASE("data: a worker's exception reaches the consumer with the file name; on_error = Skip skips") {
  TempDir dir;
  make_image_folder(dir.path, 2, 6, 4, 4, 1);
  const std::string bad = (dir.path / "class_1" / "img_2.png").string();  // dataset index 8
  write_bytes(bad, {'j', 'u', 'n', 'k'});
  data::ImageFolder images(dir.path.string());
  for (int workers : {0, 1, 3}) {
    CAPTURE(workers);
    DataLoader loader(images, {.batch_size = 4, .num_workers = workers, .prefetch = 2});
    int batches = 0;
    auto consume = [&] {
      for (auto& [x, y] : loader) {
        (void)x;
        ++batches;
      }
    };
    CHECK_THROWS_WITH_AS(
        consume(),
        doctest::Contains(
            ("DataLoader: sample 8 (batch 2 of epoch 0): decode_image: '" + bad + "' is not a PNG").c_str()),
        Error);
    CHECK(batches == 2);  // batches 0 and 1 were delivered first, in order
    CHECK_THROWS_WITH_AS(consume(), doctest::Contains("sample 8 (batch 2 of epoch 1)"), Error);

    DataLoader skipping(images, {.batch_size = 4, .num_workers = workers, .on_error = data::OnError::Skip});
    Epoch e = run_epoch(skipping);
    REQUIRE(e.y.size() == 3);
    CHECK(e.y[2] == std::vector<int64_t>{1, 1, 1});  // indices 9, 10, 11
    CHECK(skipping.stats().skipped == 1);
    CHECK(skipping.stats().samples == 11);
  }
  // Samples of different sizes cannot be batched: the message names the sample.
  data::write_png((dir.path / "class_1" / "img_2.png").string(), full({5, 4, 1}, 1.0, kU8));
  data::ImageFolder mixed(dir.path.string());
  DataLoader loader(mixed, {.batch_size = 12, .num_workers = 2});
  CHECK_THROWS_WITH_AS(loader.begin(),
                       doctest::Contains("cannot batch sample 8: its x is f32 [3,5,4] but sample 0's is f32 [3,4,4]"),
                       Error);
}

// A dataset's own exception type (here std::out_of_range from a vector's at()) is handled as an
// mdl::Error: skipped under on_error = Skip, else reported with the sample, batch and epoch.
TEST_CASE("data: a dataset's std::exception is skipped or named like an mdl::Error") {
  class Throwing : public data::Dataset {
   public:
    int64_t size() const override { return 8; }
    data::Sample get(int64_t i) const override {
      if (i == 5) (void)std::vector<int>{}.at(3);
      return {full({2}, double(i)), full({}, double(i), kI64)};
    }
    std::string identity() const override { return "Throwing"; }
  } ds;
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    DataLoader raising(ds, {.batch_size = 4, .num_workers = workers});
    CHECK_THROWS_WITH_AS(run_epoch(raising), doctest::Contains("DataLoader: sample 5 (batch 1 of epoch 0): "), Error);
    DataLoader skipping(ds, {.batch_size = 4, .num_workers = workers, .on_error = data::OnError::Skip});
    Epoch e = run_epoch(skipping);
    REQUIRE(e.y.size() == 2);
    CHECK(e.y[1] == std::vector<int64_t>{4, 6, 7});
    CHECK(skipping.stats().skipped == 1);
  }
}

TEST_CASE("data: drop_last, pin_memory, text batches, statistics and bad options") {
  TempDir dir;
  make_image_folder(dir.path, 1, 7, 2, 2, 1);
  data::ImageFolder images(dir.path.string());
  DataLoader keep(images, {.batch_size = 3});
  DataLoader drop(images, {.batch_size = 3, .drop_last = true});
  CHECK(keep.size() == 3);
  CHECK(drop.size() == 2);
  CHECK(run_epoch(keep).y.back().size() == 1);
  CHECK(run_epoch(drop).y.size() == 2);

  DataLoader pinned(images, {.batch_size = 7, .num_workers = 1, .pin_memory = true});
  Epoch p = run_epoch(pinned);
  DataLoader unpinned(images, {.batch_size = 7});
  CHECK(p == run_epoch(unpinned));

  const std::string text = "hello, world";
  write_bytes((dir.path / "t.txt").string(), std::vector<uint8_t>(text.begin(), text.end()));
  data::TextDataset corpus((dir.path / "t.txt").string(), 4);
  DataLoader tokens(corpus, {.batch_size = 2, .num_workers = 2});
  auto it = tokens.begin();
  CHECK(it->x.shape() == Shape{2, 4});
  CHECK(it->x.dtype() == kI64);
  CHECK(corpus.decode(it->x.select(0, 1).to_vector<int64_t>()) == "ello");
  CHECK(corpus.decode(it->y.select(0, 1).to_vector<int64_t>()) == "llo,");

  data::LoaderStats s = keep.stats();
  CHECK(s.batches == 3);
  CHECK(s.samples == 7);
  CHECK(s.wait_seconds > 0);  // without workers, loading is waiting
  CHECK(s.wait_seconds <= s.epoch_seconds);
  keep.reset_stats();
  CHECK(keep.stats().batches == 0);

  CHECK_THROWS_WITH_AS(DataLoader(images, {.batch_size = 0}), doctest::Contains("batch_size must be at least 1, got 0"),
                       Error);
  CHECK_THROWS_WITH_AS(DataLoader(images, {.prefetch = -1}), doctest::Contains("prefetch must be >= 0"), Error);
  CHECK_THROWS_WITH_AS(DataLoader(images, {.num_workers = -2}), doctest::Contains("num_workers must be in [0, 256]"),
                       Error);
  CHECK_THROWS_WITH_AS(DataLoader(images, {.before_cache = std::make_shared<data::RandomCrop>(2)}),
                       doctest::Contains("before_cache must be deterministic, but RandomCrop(2,0) is random"), Error);
  const std::string file = (dir.path / "t.txt").string();
  CHECK_THROWS_WITH_AS(DataLoader(images, {.cache = Cache::File, .cache_dir = file + "/sub"}),
                       doctest::Contains("cannot create cache folder"), Error);
}

TEST_CASE("data: the DESIGN example: Fashion-MNIST in shuffled f32 batches with structured bindings") {
  manual_seed(0);
  data::FashionMNIST train("/usr/share/datasets/fashion-mnist", /*train=*/true);
  DataLoader loader(train,
                    {.batch_size = 128, .shuffle = true, .num_workers = 2, .prefetch = 4, .cache = Cache::Memory});
  CHECK(loader.size() == 469);
  int n = 0;
  for (auto& [x, y] : loader) {
    CHECK(x.shape() == Shape{128, 1, 28, 28});
    CHECK(x.dtype() == kF32);
    CHECK(y.shape() == Shape{128});
    CHECK(y.dtype() == kI64);
    const int64_t first = loader.epoch_order(0)[size_t(n) * 128];
    CHECK(y.to_vector<int64_t>()[0] == train.label(first));
    CHECK(x.select(0, 0).to_vector<float>() == data::ToTensor().apply(train.get(first).x).to_vector<float>());
    if (++n == 3) break;
  }
  // Three batches taken, up to four more prepared ahead before the break stopped the workers.
  CHECK(loader.stats().cache_misses >= 3 * 128);
  CHECK(loader.stats().cache_misses <= 7 * 128);
}
