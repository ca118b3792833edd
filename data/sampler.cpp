// DistributedSampler: one permutation per (seed, epoch), the same on every rank, padded or cut to
// a multiple of world_size, then dealt out round-robin.
#include "data/sampler.h"

#include <utility>

#include "data/transforms.h"
#include "tensor/error.h"
#include "ops/native/factory.h"

namespace mdl::data {
namespace {
constexpr uint64_t kDistributedStream = 0xd157ull;  // keeps this shuffle apart from the loader's
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       DistributedSamplerOptions options)
    : n_(dataset_size), rank_(rank), world_(world_size), opt_(options) {
  MDL_CHECK(world_size >= 1, "DistributedSampler: world_size must be at least 1, got ", world_size);
  MDL_CHECK(rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank, " is outside [0, ", world_size, ")");
  MDL_CHECK(dataset_size >= 0, "DistributedSampler: negative dataset size ", dataset_size);
  MDL_CHECK(opt_.drop_last || dataset_size > 0 || world_size == 1,
            "DistributedSampler: an empty dataset cannot be padded to ", world_size, " ranks");
  per_rank_ = opt_.drop_last ? n_ / world_ : (n_ + world_ - 1) / world_;
  seed_ = opt_.seed.value_or(default_generator().seed());
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> perm(static_cast<size_t>(n_));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  if (opt_.shuffle) {
    Generator g = sample_generator(seed_ ^ kDistributedStream, epoch, -1);
    for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[size_t(g.next_u64() % i)]);  // Fisher-Yates
  }
  const int64_t total = per_rank_ * world_;
  for (int64_t i = n_; i < total; ++i) perm.push_back(perm[size_t((i - n_) % n_)]);  // pad (drop_last: total <= n)
  std::vector<int64_t> mine;
  mine.reserve(size_t(per_rank_));
  for (int64_t i = rank_; i < total; i += world_) mine.push_back(perm[size_t(i)]);
  return mine;
}

}  // namespace mdl::data
