// Samplers: which dataset indices an epoch visits, and in what order, when the loader's own
// (all indices, shuffled or not) is not wanted. DistributedSampler gives each of world_size
// processes a disjoint shard of every epoch's permutation, as torch.utils.data.DistributedSampler:
//
//   data::DataLoader loader(train, {.batch_size = 64,
//       .sampler = std::make_shared<data::DistributedSampler>(train.size(), pg.rank(), pg.world_size())});
//   loader.set_epoch(e);   // the sampler's set_epoch: the permutation depends on (seed, epoch)
//
// Indices must depend on the epoch only, never on timing, so every rank agrees.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace mdl::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual int64_t size() const = 0;  // indices per epoch
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

struct DistributedSamplerOptions {
  bool shuffle = true;
  // true: drop the tail so every rank gets floor(n / world) samples; false: pad by repeating
  // the permutation's first indices so every rank gets ceil(n / world).
  bool drop_last = false;
  std::optional<uint64_t> seed = {};  // default: the default generator's seed (manual_seed)
};

class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, DistributedSamplerOptions options = {});
  int64_t size() const override { return per_rank_; }
  // Rank r takes positions r, r + world, r + 2 world, ... of the (padded) permutation.
  std::vector<int64_t> indices(int64_t epoch) const override;
  uint64_t seed() const { return seed_; }

 private:
  int64_t n_, per_rank_;
  int rank_, world_;
  DistributedSamplerOptions opt_;
  uint64_t seed_;
};

}  // namespace mdl::data
