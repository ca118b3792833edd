// ClassSubset: only the samples of some classes of another dataset, their labels renumbered
// 0..k-1 in the order the classes are given (mdl-train --classes). The matching samples are found
// once, through the base's label(), which reads stored labels without decoding an image where the
// dataset keeps them (IDX, CIFAR, ImageFolder).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

class ClassSubset : public Dataset {
 public:
  // classes: distinct labels of `base`, at least one, each with at least one sample there.
  ClassSubset(std::shared_ptr<const Dataset> base, std::vector<int64_t> classes);
  int64_t size() const override { return int64_t(indices_.size()); }
  Sample get(int64_t index) const override;  // the base's sample with y = the new label
  int64_t label(int64_t index) const override;
  // The base's identity and the classes in order: another choice or order is other data.
  std::string identity() const override { return identity_; }
  const std::vector<int64_t>& classes() const { return classes_; }
  // The base's index of sample `index`.
  int64_t base_index(int64_t index) const;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> classes_;
  std::vector<int64_t> indices_;  // into base_, in its order
  std::vector<int64_t> labels_;   // the new label of each kept sample
  std::string identity_;
};

}  // namespace mdl::data
