// DistributedSampler (data/sampler.h) and the DataLoader's sampler option: disjoint shards that
// cover each epoch's permutation, padding and drop_last, a new order per epoch, and the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "data/loader.h"
#include "data/sampler.h"
#include "data/tensor_dataset.h"
#include "tensor/error.h"
#include "ops/native/factory.h"

using namespace mdl;
using data::DistributedSampler;

namespace {
std::vector<std::vector<int64_t>> shards(int64_t n, int world, int64_t epoch, data::DistributedSamplerOptions o) {
  std::vector<std::vector<int64_t>> s;
  for (int r = 0; r < world; ++r) s.push_back(DistributedSampler(n, r, world, o).indices(epoch));
  return s;
}
}  // namespace

TEST_CASE("DistributedSampler: the ranks' shards are disjoint and cover the epoch's permutation") {
  const auto s = shards(12, 3, 0, {.seed = 5});
  std::vector<int64_t> all;
  for (const auto& r : s) {
    CHECK(r.size() == 4);
    all.insert(all.end(), r.begin(), r.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(12);
  for (int64_t i = 0; i < 12; ++i) expected[size_t(i)] = i;
  CHECK(all == expected);
  CHECK(s[0] != std::vector<int64_t>{0, 3, 6, 9});  // shuffled
}

TEST_CASE("DistributedSampler: padding repeats the first indices; drop_last cuts the tail") {
  const auto padded = shards(10, 3, 1, {.seed = 5});
  std::multiset<int64_t> seen;
  for (const auto& r : padded) {
    CHECK(r.size() == 4);  // ceil(10 / 3)
    seen.insert(r.begin(), r.end());
  }
  CHECK(seen.size() == 12);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 10);  // every sample, two twice
  const auto cut = shards(10, 3, 1, {.drop_last = true, .seed = 5});
  std::set<int64_t> distinct;
  for (const auto& r : cut) {
    CHECK(r.size() == 3);
    distinct.insert(r.begin(), r.end());
  }
  CHECK(distinct.size() == 9);
  const auto plain = shards(5, 2, 0, {.shuffle = false});
  CHECK(plain[0] == std::vector<int64_t>{0, 2, 4});
  CHECK(plain[1] == std::vector<int64_t>{1, 3, 0});
}

TEST_CASE("DistributedSampler: the order depends on (seed, epoch) only") {
  DistributedSampler a(100, 1, 2, {.seed = 9}), b(100, 1, 2, {.seed = 9}), c(100, 1, 2, {.seed = 10});
  CHECK(a.indices(3) == b.indices(3));
  CHECK(a.indices(3) != a.indices(4));
  CHECK(a.indices(3) != c.indices(3));
  manual_seed(42);
  CHECK(DistributedSampler(10, 0, 2).seed() == 42);
}

TEST_CASE("DistributedSampler: bad rank, world size or dataset throw naming the value") {
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, 2), doctest::Contains("rank 2 is outside [0, 2)"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, -1, 2), doctest::Contains("rank -1 is outside"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 0, 0), doctest::Contains("world_size must be at least 1, got 0"), Error);
  CHECK_THROWS_WITH_AS(DistributedSampler(0, 0, 2), doctest::Contains("empty dataset cannot be padded"), Error);
}

TEST_CASE("DataLoader with a DistributedSampler: batches hold this rank's shard, epoch by epoch") {
  const int64_t n = 11;
  Tensor x = arange(0, double(n)).reshape({n, 1});
  data::TensorDataset ds(x, arange(0, double(n)).to(kI64));
  auto sampler = std::make_shared<DistributedSampler>(n, 1, 2, data::DistributedSamplerOptions{.seed = 3});
  data::DataLoader loader(ds, {.batch_size = 4, .seed = 0, .sampler = sampler});
  CHECK(loader.size() == 2);  // 6 samples on this rank
  for (int64_t epoch : {0, 1}) {
    loader.set_epoch(epoch);
    std::vector<int64_t> got;
    for (auto& [xb, yb] : loader)
      for (int64_t v : yb.to_vector<int64_t>()) got.push_back(v);
    CHECK(got == sampler->indices(epoch));
    CHECK(loader.epoch_order(epoch) == sampler->indices(epoch));
  }
  CHECK_THROWS_WITH_AS(data::DataLoader(ds, {.batch_size = 4, .shuffle = true, .sampler = sampler}),
                       doctest::Contains("shuffle and sampler are mutually exclusive"), Error);
  auto too_big = std::make_shared<DistributedSampler>(n + 5, 0, 1, data::DistributedSamplerOptions{.shuffle = false});
  data::DataLoader bad(ds, {.batch_size = 4, .sampler = too_big});
  CHECK_THROWS_WITH_AS(bad.epoch_order(0), doctest::Contains("index 11 outside the dataset of 11 samples"), Error);
}
