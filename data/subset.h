// Subset: n samples of another dataset (all of them when it has fewer), for quick runs on part of
// the data (mdl-train --subset, the examples' sample limits): the first n, or n spread evenly over
// it (sample i is base sample floor(i * size / n)), for data stored in class order such as an
// ImageFolder, whose first n samples would hold only its first classes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"

namespace mdl::data {

class Subset : public Dataset {
 public:
  enum class Pick { First, Spread };
  Subset(std::shared_ptr<const Dataset> base, int64_t n, Pick pick = Pick::First);  // n >= 0
  int64_t size() const override { return n_; }
  Sample get(int64_t index) const override;
  int64_t label(int64_t index) const override;
  std::string identity() const override;
  int64_t base_index(int64_t index) const;  // the base sample behind `index`

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t n_;
  Pick pick_;
};

}  // namespace mdl::data
