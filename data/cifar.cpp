// CIFAR-10 binary reading: size and label checks per file, planes reordered to HWC once.
#include "data/cifar.h"

#include <cstring>
#include <filesystem>

#include "data/file_util.h"
#include "tensor/error.h"

namespace mdl::data {

namespace {
constexpr int64_t kSide = 32, kPlane = kSide * kSide, kRecord = 1 + 3 * kPlane;
}

Cifar10Binary::Cifar10Binary(const std::string& root, bool train) {
  std::vector<std::string> names;
  if (train)
    for (int b = 1; b <= 5; ++b) names.push_back("data_batch_" + std::to_string(b) + ".bin");
  else names.push_back("test_batch.bin");
  identity_ = "Cifar10Binary(";
  for (const std::string& name : names) {
    const std::string path = (std::filesystem::path(root) / name).string();
    std::vector<uint8_t> bytes = read_file(path, "Cifar10Binary");
    MDL_CHECK(!bytes.empty() && bytes.size() % kRecord == 0, "Cifar10Binary: '", path, "' is ", bytes.size(),
              " bytes, not a whole number of ", kRecord, "-byte records (truncated at offset ",
              bytes.size() / kRecord * kRecord, "?)");
    const size_t records = bytes.size() / kRecord;
    const size_t base = labels_.size();
    labels_.resize(base + records);
    pixels_.resize((base + records) * 3 * kPlane);
    for (size_t r = 0; r < records; ++r) {
      const uint8_t* rec = bytes.data() + r * kRecord;
      MDL_CHECK(rec[0] < 10, "Cifar10Binary: '", path, "' has label ", int(rec[0]), " at offset ", r * kRecord,
                " (expected 0 to 9)");
      labels_[base + r] = rec[0];
      uint8_t* out = pixels_.data() + (base + r) * 3 * kPlane;  // (32, 32, 3) from (3, 32, 32)
      for (int64_t p = 0; p < kPlane; ++p)
        for (int64_t c = 0; c < 3; ++c) out[p * 3 + c] = rec[1 + c * kPlane + p];
    }
    identity_ += file_stamp(path, "Cifar10Binary") + ",";
  }
  identity_ += ")";
}

Sample Cifar10Binary::get(int64_t index) const {
  check_index("Cifar10Binary::get", index, size());
  Tensor x = make_tensor({kSide, kSide, 3}, kU8, Device::cpu());
  std::memcpy(x.raw_data(), pixels_.data() + index * 3 * kPlane, size_t(3 * kPlane));
  return {x, label_tensor(labels_[size_t(index)])};
}

const std::vector<std::string>& Cifar10Binary::classes() {
  static const std::vector<std::string> names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                 "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

}  // namespace mdl::data
