// Subset: indices checked against the prefix, then passed through.
#include "data/subset.h"

#include <algorithm>

#include "tensor/error.h"

namespace mdl::data {

Subset::Subset(std::shared_ptr<const Dataset> base, int64_t n) : base_(std::move(base)) {
  MDL_CHECK(base_, "Subset: no dataset");
  MDL_CHECK(n >= 0, "Subset: the sample count must be >= 0, got ", n);
  n_ = std::min(n, base_->size());
}

Sample Subset::get(int64_t index) const {
  check_index("subset", index, n_);
  return base_->get(index);
}

int64_t Subset::label(int64_t index) const {
  check_index("subset", index, n_);
  return base_->label(index);
}

}  // namespace mdl::data
