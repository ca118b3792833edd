// ClassSubset: one pass over the base's labels picks the samples and their new labels.
#include "data/class_subset.h"

#include <unordered_map>

#include "tensor/error.h"

namespace mdl::data {

ClassSubset::ClassSubset(std::shared_ptr<const Dataset> base, std::vector<int64_t> classes)
    : base_(std::move(base)), classes_(std::move(classes)) {
  MDL_CHECK(base_, "ClassSubset: no dataset");
  MDL_CHECK(!classes_.empty(), "ClassSubset: no classes given");
  std::unordered_map<int64_t, int64_t> new_label;  // base label -> position in classes_
  for (size_t i = 0; i < classes_.size(); ++i) {
    MDL_CHECK(classes_[i] >= 0, "ClassSubset: class ", classes_[i], " is negative");
    MDL_CHECK(new_label.emplace(classes_[i], int64_t(i)).second, "ClassSubset: class ", classes_[i], " is given twice");
  }
  std::vector<int64_t> count(classes_.size(), 0);
  for (int64_t i = 0; i < base_->size(); ++i) {
    auto it = new_label.find(base_->label(i));
    if (it == new_label.end()) continue;
    indices_.push_back(i);
    labels_.push_back(it->second);
    ++count[size_t(it->second)];
  }
  identity_ = base_->identity() + "|classes ";
  for (size_t i = 0; i < classes_.size(); ++i) {
    MDL_CHECK(count[i] > 0, "ClassSubset: class ", classes_[i], " has no samples in ", base_->identity());
    if (i) identity_ += ',';
    identity_ += std::to_string(classes_[i]);
  }
}

Sample ClassSubset::get(int64_t index) const {
  check_index("ClassSubset::get", index, size());
  Sample s = base_->get(indices_[size_t(index)]);
  s.y = label_tensor(labels_[size_t(index)]);
  return s;
}

int64_t ClassSubset::label(int64_t index) const {
  check_index("ClassSubset::label", index, size());
  return labels_[size_t(index)];
}

int64_t ClassSubset::base_index(int64_t index) const {
  check_index("ClassSubset::base_index", index, size());
  return indices_[size_t(index)];
}

}  // namespace mdl::data
