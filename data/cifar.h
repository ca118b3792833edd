// CIFAR-10 binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin): records of one
// label byte and 3072 pixel bytes (3 planes of 32x32). Images come out as u8 HWC (32, 32, 3).
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

class Cifar10Binary : public Dataset {
 public:
  Cifar10Binary(const std::string& root, bool train = true);
  int64_t size() const override { return int64_t(labels_.size()); }
  Sample get(int64_t index) const override;
  std::string identity() const override { return identity_; }
  static const std::vector<std::string>& classes();

 private:
  std::vector<uint8_t> pixels_;  // (N, 32, 32, 3)
  std::vector<uint8_t> labels_;
  std::string identity_;
};

}  // namespace mdl::data
