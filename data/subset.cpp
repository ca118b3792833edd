// Subset: indices checked against n, then mapped to the base's.
#include "data/subset.h"

#include <algorithm>

#include "tensor/error.h"

namespace mdl::data {

Subset::Subset(std::shared_ptr<const Dataset> base, int64_t n, Pick pick) : base_(std::move(base)), pick_(pick) {
  MDL_CHECK(base_, "Subset: no dataset");
  MDL_CHECK(n >= 0, "Subset: the sample count must be >= 0, got ", n);
  n_ = std::min(n, base_->size());
}

int64_t Subset::base_index(int64_t index) const {
  check_index("subset", index, n_);
  if (pick_ == Pick::First || n_ == base_->size()) return index;
  // index < n_ < size < 2^62 (a dataset's count), so the product fits in 128 bits; floor(i * size / n).
  return int64_t((unsigned __int128)index * uint64_t(base_->size()) / uint64_t(n_));
}

Sample Subset::get(int64_t index) const { return base_->get(base_index(index)); }

std::string Subset::identity() const {
  return base_->identity() + (pick_ == Pick::First ? "|first " : "|spread ") + std::to_string(n_);
}

int64_t Subset::label(int64_t index) const { return base_->label(base_index(index)); }

}  // namespace mdl::data
