// IDX datasets (the MNIST family's format, raw or gzip) and Fashion-MNIST on top of them.
// Images come out as u8 HWC tensors (H, W, 1) and labels as I64 scalars.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mdl::data {

// One IDX file decoded: its dimensions and u8 payload. Checks the magic (two zero bytes), the
// dtype code (0x08, unsigned byte, the only one image data sets use), and that the payload size
// matches the dimensions; errors name the file and the offset.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
IdxArray read_idx(const std::string& path);

class IdxDataset : public Dataset {
 public:
  // images: N x H x W (or N x H x W x C); labels: N.
  IdxDataset(const std::string& images_path, const std::string& labels_path);
  int64_t size() const override { return n_; }
  Sample get(int64_t index) const override;
  std::string identity() const override { return identity_; }
  int64_t height() const { return h_; }
  int64_t width() const { return w_; }
  int64_t channels() const { return c_; }
  int64_t label(int64_t index) const override;

 private:
  std::vector<uint8_t> pixels_, labels_;
  int64_t n_ = 0, h_ = 0, w_ = 0, c_ = 1;
  std::string identity_;
};

inline constexpr const char* kFashionMnistRoot = "/usr/share/datasets/fashion-mnist";

// Fashion-MNIST: 60,000 training or 10,000 test images of 28x28, ten classes. Looks for the
// Debian package's files (train-images-idx3-ubyte.gz, ...), or the same names without .gz.
class FashionMNIST : public IdxDataset {
 public:
  explicit FashionMNIST(const std::string& root = kFashionMnistRoot, bool train = true);
  static const std::vector<std::string>& classes();  // "T-shirt/top", "Trouser", ...
};

}  // namespace mdl::data
