// The caches with on_error = Skip: a sample that failed to load is remembered for the run, so later
// epochs skip it without reading it again, and the file cache still completes and is reused by a
// later run, which tries the failed sample once more (before, one bad image kept the file cache
// from ever completing).
#include <doctest/doctest.h>

#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/support/data_test_util.h"
#include "mdl.h"

using namespace mdl;
using namespace data_test;
using data::Cache;
using data::DataLoader;

namespace {

int count_files(const fs::path& dir, const std::string& needle) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(needle) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("data: the memory cache remembers a bad sample; later epochs skip it without reading it") {
  TempDir dir;
  make_image_folder(dir.path, 2, 6, 4, 4, 1);
  write_bytes((dir.path / "class_1" / "img_2.png").string(), {'j', 'u', 'n', 'k'});  // index 8
  data::ImageFolder images(dir.path.string());
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    DataLoader loader(images, {.batch_size = 4,
                               .shuffle = true,
                               .num_workers = workers,
                               .cache = Cache::Memory,
                               .on_error = data::OnError::Skip});
    const Epoch first = run_epoch(loader);
    data::LoaderStats s = loader.stats();
    CHECK(s.skipped == 1);
    CHECK(s.samples == 11);
    CHECK(s.cache_misses == 12);
    CHECK(s.cache_hits == 0);
    run_epoch(loader);
    s = loader.stats();
    CHECK(s.skipped == 2);        // skipped again in epoch 1 ...
    CHECK(s.cache_misses == 12);  // ... without a second attempt to decode it
    CHECK(s.cache_hits == 11);
    CHECK(s.samples == 22);
    size_t n = 0;
    for (const auto& y : first.y) n += y.size();
    CHECK(n == 11);
  }
}

TEST_CASE("data: with on_error = Skip the file cache completes, and a later run reuses it and skips the same sample") {
  TempDir dir;
  const fs::path root = dir.path / "images", cache = dir.path / "cache";
  make_image_folder(root, 2, 5, 4, 4, 1);
  const std::string bad = (root / "class_0" / "img_3.png").string();  // index 3
  write_bytes(bad, {'n', 'o', 't', ' ', 'a', ' ', 'p', 'n', 'g'});
  data::ImageFolder images(root.string());
  const data::LoaderOptions opt{.batch_size = 3,
                                .num_workers = 2,
                                .cache = Cache::File,
                                .cache_dir = cache.string(),
                                .on_error = data::OnError::Skip};
  Epoch built;
  {
    DataLoader loader(images, opt);
    built = run_epoch(loader);
    CHECK(loader.stats().skipped == 1);
    CHECK(loader.stats().cache_misses == 10);
    CHECK_FALSE(loader.stats().file_cache_reused);
  }
  CHECK(count_files(cache, ".mdlcache") == 1);
  CHECK(count_files(cache, ".partial") == 0);  // complete, renamed into place

  SUBCASE("a new loader (as a new run would) reads every good sample from the file, and tries the bad one again") {
    DataLoader again(images, opt);
    CHECK(run_epoch(again) == built);
    run_epoch(again);
    const data::LoaderStats s = again.stats();
    CHECK(s.file_cache_reused);
    CHECK(s.cache_misses == 1);  // once per run, not per epoch
    CHECK(s.cache_hits == 2 * 9);
    CHECK(s.skipped == 2);
  }
  SUBCASE("with on_error = Raise a new run raises the sample's own error, naming the image") {
    data::LoaderOptions raise = opt;
    raise.on_error = data::OnError::Raise;
    DataLoader strict(images, raise);
    CHECK_THROWS_WITH_AS(run_epoch(strict), doctest::Contains(("'" + bad + "' is not a PNG").c_str()), Error);
  }
  SUBCASE("a repaired image changes the source, so the cache is rebuilt and the sample comes back") {
    data::write_png(bad, full({4, 4, 1}, 9.0, kU8));
    data::ImageFolder repaired(root.string());
    DataLoader fresh(repaired, opt);
    run_epoch(fresh);
    CHECK_FALSE(fresh.stats().file_cache_reused);
    CHECK(fresh.stats().skipped == 0);
    CHECK(fresh.stats().samples == 10);
  }
}

// A sampler that never visits some indices (drop_last's tail here) would leave the file cache
// unfinished, removed at exit and rebuilt by every run: the first epoch's end loads what it lacks.
TEST_CASE("data: the file cache completes after an epoch that skipped indices, and the next run reuses it") {
  TempDir dir;
  const fs::path root = dir.path / "images", cache = dir.path / "cache";
  make_image_folder(root, 2, 5, 4, 4, 1);  // 10 images: batches of 4 with drop_last visit 8
  data::ImageFolder images(root.string());
  const data::LoaderOptions opt{.batch_size = 4,
                                .drop_last = true,
                                .num_workers = 2,
                                .cache = Cache::File,
                                .cache_dir = cache.string()};
  Epoch built;
  {
    DataLoader loader(images, opt);
    built = run_epoch(loader);
    CHECK(built.y.size() == 2);
  }
  CHECK(count_files(cache, ".mdlcache") == 1);
  CHECK(count_files(cache, ".partial") == 0);
  DataLoader again(images, opt);
  CHECK(again.stats().file_cache_reused);
  CHECK(run_epoch(again) == built);
  CHECK(again.stats().cache_misses == 0);
}
