// Classification metrics for validation: a confusion matrix accumulated batch by batch, and
// the accuracy, per-class precision/recall/F1 and macro-F1 read from it (as scikit-learn's
// f1_score(average="macro"), where a class with no predictions and no samples scores 0).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mdl::train {

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int64_t classes);
  // logits (N, classes) or predicted labels (N) of an integer dtype; targets (N) integer.
  void add(const Tensor& logits_or_predictions, const Tensor& targets);
  void add(int64_t target, int64_t predicted);

  int64_t classes() const { return classes_; }
  int64_t count(int64_t target, int64_t predicted) const { return counts_[size_t(target * classes_ + predicted)]; }
  int64_t total() const;
  double accuracy() const;            // 0 when empty
  double precision(int64_t c) const;  // 0 when nothing was predicted as c
  double recall(int64_t c) const;     // 0 when c has no samples
  double f1(int64_t c) const;
  double macro_f1() const;
  // Rows are true classes, columns predicted ones; names label the rows when given.
  std::string str(const std::vector<std::string>& names = {}) const;

 private:
  int64_t classes_;
  std::vector<int64_t> counts_;  // (classes, classes), row = target
};

}  // namespace mdl::train
