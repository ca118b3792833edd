// Subset: the first n samples of another dataset (all of them when it has fewer), for quick
// runs on part of the data (mdl-train --subset, the examples' sample limits).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"

namespace mdl::data {

class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, int64_t n);  // n >= 0
  int64_t size() const override { return n_; }
  Sample get(int64_t index) const override;
  int64_t label(int64_t index) const override;
  std::string identity() const override { return base_->identity() + "|first " + std::to_string(n_); }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t n_;
};

}  // namespace mdl::data
