// CIFAR-10 and CIFAR-100 binary files: records of label bytes then 3072 pixel bytes (3 planes of
// 32x32). CIFAR-10: data_batch_1.bin ... data_batch_5.bin and test_batch.bin, one label byte per
// record. CIFAR-100: train.bin and test.bin, two label bytes per record (coarse, then fine).
// Images come out as u8 HWC (32, 32, 3), labels as I64 scalars.
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
  int64_t label(int64_t index) const override;
  std::string identity() const override { return identity_; }
  static const std::vector<std::string>& classes();

 private:
  std::vector<uint8_t> pixels_;  // (N, 32, 32, 3)
  std::vector<uint8_t> labels_;
  std::string identity_;
};

// Which of a CIFAR-100 record's two labels a sample carries: one of the 100 classes, or one of
// the 20 superclasses that group them five by five.
enum class Cifar100Labels { Fine, Coarse };

class Cifar100Binary : public Dataset {
 public:
  // Reads root/train.bin or root/test.bin. Both labels of every record are checked (coarse < 20,
  // fine < 100) whichever is kept.
  Cifar100Binary(const std::string& root, bool train = true, Cifar100Labels labels = Cifar100Labels::Fine);
  int64_t size() const override { return int64_t(labels_.size()); }
  Sample get(int64_t index) const override;
  int64_t label(int64_t index) const override;
  std::string identity() const override { return identity_; }
  // The names of the labels this dataset gives: fine_classes() or coarse_classes().
  const std::vector<std::string>& classes() const;
  static const std::vector<std::string>& fine_classes();    // "apple", "aquarium_fish", ... (100)
  static const std::vector<std::string>& coarse_classes();  // "aquatic_mammals", "fish", ... (20)

 private:
  Cifar100Labels kind_;
  std::vector<uint8_t> pixels_;  // (N, 32, 32, 3)
  std::vector<uint8_t> labels_;  // the kept label of each record
  std::string identity_;
};

}  // namespace mdl::data
