// ConfusionMatrix: counting and the metrics derived from the counts.
#include "train/metrics.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "tensor/error.h"
#include "ops/ops.h"

namespace mdl::train {

ConfusionMatrix::ConfusionMatrix(int64_t classes) : classes_(classes) {
  MDL_CHECK(classes > 0, "ConfusionMatrix: classes must be positive, got ", classes);
  counts_.assign(size_t(classes * classes), 0);
}

void ConfusionMatrix::add(int64_t target, int64_t predicted) {
  MDL_CHECK(target >= 0 && target < classes_, "ConfusionMatrix: target ", target, " is outside [0, ", classes_, ")");
  MDL_CHECK(predicted >= 0 && predicted < classes_, "ConfusionMatrix: prediction ", predicted, " is outside [0, ",
            classes_, ")");
  ++counts_[size_t(target * classes_ + predicted)];
}

void ConfusionMatrix::add(const Tensor& scores, const Tensor& targets) {
  MDL_CHECK(targets.dim() == 1 && !is_floating(targets.dtype()), "ConfusionMatrix: targets must be 1-D integers, got ",
            shape_str(targets.shape()), " ", dtype_name(targets.dtype()));
  Tensor predicted;
  if (scores.dim() == 2 && is_floating(scores.dtype())) {
    MDL_CHECK(scores.size(1) == classes_, "ConfusionMatrix: logits ", shape_str(scores.shape()), " have ",
              scores.size(1), " classes, expected ", classes_);
    predicted = argmax(scores.detach(), 1);
  } else {
    MDL_CHECK(scores.dim() == 1 && !is_floating(scores.dtype()),
              "ConfusionMatrix: expected logits (N, classes) or integer predictions (N), got ",
              shape_str(scores.shape()), " ", dtype_name(scores.dtype()));
    predicted = scores;
  }
  MDL_CHECK(predicted.size(0) == targets.size(0), "ConfusionMatrix: ", predicted.size(0), " predictions for ",
            targets.size(0), " targets");
  const auto p = predicted.to(Device::cpu()).to(kI64).to_vector<int64_t>();
  const auto t = targets.to(Device::cpu()).to(kI64).to_vector<int64_t>();
  for (size_t i = 0; i < p.size(); ++i) add(t[i], p[i]);
}

int64_t ConfusionMatrix::total() const {
  int64_t n = 0;
  for (int64_t c : counts_) n += c;
  return n;
}

double ConfusionMatrix::accuracy() const {
  int64_t right = 0;
  for (int64_t c = 0; c < classes_; ++c) right += count(c, c);
  const int64_t n = total();
  return n ? double(right) / double(n) : 0.0;
}

double ConfusionMatrix::precision(int64_t c) const {
  int64_t predicted = 0;
  for (int64_t t = 0; t < classes_; ++t) predicted += count(t, c);
  return predicted ? double(count(c, c)) / double(predicted) : 0.0;
}

double ConfusionMatrix::recall(int64_t c) const {
  int64_t actual = 0;
  for (int64_t p = 0; p < classes_; ++p) actual += count(c, p);
  return actual ? double(count(c, c)) / double(actual) : 0.0;
}

double ConfusionMatrix::f1(int64_t c) const {
  const double p = precision(c), r = recall(c);
  return p + r > 0 ? 2 * p * r / (p + r) : 0.0;
}

double ConfusionMatrix::macro_f1() const {
  double s = 0;
  for (int64_t c = 0; c < classes_; ++c) s += f1(c);
  return s / double(classes_);
}

namespace {
std::string right_aligned(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}
}  // namespace

std::string ConfusionMatrix::str(const std::vector<std::string>& names) const {
  size_t label = 5;
  for (auto& n : names) label = std::max(label, n.size());
  int64_t widest = 1;
  for (int64_t c : counts_) widest = std::max(widest, c);
  const size_t w = std::max<size_t>(4, std::to_string(widest).size() + 1);
  std::ostringstream s;
  char cell[32];
  s << std::string(label, ' ') << " |";
  for (int64_t p = 0; p < classes_; ++p) s << right_aligned(std::to_string(p), w);
  s << "   recall\n" << std::string(label + 2 + w * size_t(classes_) + 9, '-') << "\n";
  for (int64_t t = 0; t < classes_; ++t) {
    std::string n = size_t(t) < names.size() ? names[size_t(t)] : std::to_string(t);
    s << n << std::string(label - n.size(), ' ') << " |";
    for (int64_t p = 0; p < classes_; ++p) s << right_aligned(std::to_string(count(t, p)), w);
    std::snprintf(cell, sizeof cell, "   %.3f\n", recall(t));
    s << cell;
  }
  return s.str();
}

}  // namespace mdl::train
