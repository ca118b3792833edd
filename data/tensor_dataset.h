// TensorDataset: samples are rows of in-memory tensors, x[i] and y[i].
#pragma once
#include <string>

#include "data/dataset.h"

namespace mdl::data {

class TensorDataset : public Dataset {
 public:
  // x and y must agree in their first dimension; both stay on the CPU.
  TensorDataset(Tensor x, Tensor y);
  int64_t size() const override { return x_.size(0); }
  Sample get(int64_t index) const override;  // contiguous copies of row `index`
  // Includes a hash of the contents, so a file cache notices changed data.
  std::string identity() const override;

 private:
  Tensor x_, y_;
};

}  // namespace mdl::data
