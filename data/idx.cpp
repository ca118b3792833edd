// IDX decoding with every header field checked, and the Fashion-MNIST file layout.
#include "data/idx.h"

#include <cstring>
#include <filesystem>

#include "data/file_util.h"
#include "tensor/checked_size.h"
#include "tensor/error.h"

namespace mdl::data {

IdxArray read_idx(const std::string& path) {
  // The header is read and checked first; a gzip file is then inflated only as far as it implies.
  constexpr size_t kMaxHeader = 4 + 4 * 4;
  std::vector<uint8_t> raw = read_file(path, "IdxDataset");
  const std::vector<uint8_t> head = content_head(raw, path, "IdxDataset", kMaxHeader);
  MDL_CHECK(head.size() >= 4, "IdxDataset: '", path, "' is ", head.size(), " bytes, too short for an IDX header");
  MDL_CHECK(head[0] == 0 && head[1] == 0, "IdxDataset: '", path, "' has a bad magic number (bytes 0-1 are ",
            int(head[0]), ",", int(head[1]), ", expected 0,0): not an IDX file");
  MDL_CHECK(head[2] == 0x08, "IdxDataset: '", path, "' has dtype code 0x", std::hex, int(head[2]), std::dec,
            " at offset 2; only 0x08 (unsigned byte) is supported");
  const int ndim = head[3];
  MDL_CHECK(ndim >= 1 && ndim <= 4, "IdxDataset: '", path, "' declares ", ndim,
            " dimensions at offset 3 (expected 1 to 4)");
  const size_t header = 4 + 4 * size_t(ndim);
  MDL_CHECK(head.size() >= header, "IdxDataset: '", path, "' is truncated in its header (", head.size(),
            " bytes, the header needs ", header, ")");
  IdxArray a;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* p = head.data() + 4 + 4 * d;
    a.dims.push_back(int64_t(uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3])));
  }
  // Each dim is below 2^32; their product and the file size it implies are checked before use.
  const std::optional<int64_t> payload = numel_if_fits(a.dims);
  const std::optional<int64_t> expected = payload ? checked_add(*payload, int64_t(header)) : std::nullopt;
  MDL_CHECK(expected, "IdxDataset: '", path, "' declares dims ", shape_str(a.dims),
            " whose byte count overflows int64: a corrupt or crafted header");
  // One byte past the expected size, so trailing data shows without being inflated in full.
  const std::vector<uint8_t> bytes = content_head(raw, path, "IdxDataset", size_t(*expected) + 1);
  const int64_t size = int64_t(bytes.size());
  MDL_CHECK(size >= *expected, "IdxDataset: '", path, "' with dims ", shape_str(a.dims),
            " is truncated: the header declares ", *payload, " bytes of data, the file ends at offset ", size,
            " (expected ", *expected, ")");
  MDL_CHECK(size == *expected, "IdxDataset: '", path, "' with dims ", shape_str(a.dims),
            " has trailing bytes after offset ", *expected);
  a.data.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return a;
}

IdxDataset::IdxDataset(const std::string& images_path, const std::string& labels_path) {
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  MDL_CHECK(images.dims.size() == 3 || images.dims.size() == 4, "IdxDataset: '", images_path, "' has ",
            images.dims.size(), " dimensions; images need 3 (N,H,W) or 4 (N,H,W,C)");
  MDL_CHECK(labels.dims.size() == 1, "IdxDataset: '", labels_path, "' has ", labels.dims.size(),
            " dimensions; labels need 1 (N)");
  MDL_CHECK(images.dims[0] == labels.dims[0], "IdxDataset: image and label counts differ: '", images_path, "' has ",
            images.dims[0], " images, '", labels_path, "' has ", labels.dims[0], " labels");
  n_ = images.dims[0];
  h_ = images.dims[1];
  w_ = images.dims[2];
  c_ = images.dims.size() == 4 ? images.dims[3] : 1;
  MDL_CHECK(h_ > 0 && w_ > 0 && c_ > 0, "IdxDataset: '", images_path, "' declares images of ", h_, "x", w_, "x", c_,
            " (dims ", shape_str(images.dims), "): an image needs at least one pixel and one channel");
  pixels_ = std::move(images.data);
  labels_ = std::move(labels.data);
  identity_ = "IdxDataset(" + file_stamp(images_path, "IdxDataset") + "," + file_stamp(labels_path, "IdxDataset") + ")";
}

Sample IdxDataset::get(int64_t index) const {
  check_index("IdxDataset::get", index, n_);
  const int64_t n = h_ * w_ * c_;
  Tensor x = make_tensor({h_, w_, c_}, kU8, Device::cpu());
  std::memcpy(x.raw_data(), pixels_.data() + index * n, size_t(n));
  return {x, label_tensor(labels_[size_t(index)])};
}

int64_t IdxDataset::label(int64_t index) const {
  check_index("IdxDataset::label", index, n_);
  return labels_[size_t(index)];
}

namespace {
std::string fashion_file(const std::string& root, const std::string& name) {
  namespace fs = std::filesystem;
  for (const std::string& candidate : {name + ".gz", name})
    if (fs::exists(fs::path(root) / candidate)) return (fs::path(root) / candidate).string();
  MDL_FAIL("FashionMNIST: '", (fs::path(root) / (name + ".gz")).string(), "' not found (nor without .gz); install ",
           "Debian's dataset-fashion-mnist or pass the folder holding the IDX files");
}
}  // namespace

FashionMNIST::FashionMNIST(const std::string& root, bool train)
    : IdxDataset(fashion_file(root, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte"),
                 fashion_file(root, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte")) {
  const int64_t classes = int64_t(FashionMNIST::classes().size());
  for (int64_t i = 0; i < size(); ++i)
    MDL_CHECK(label(i) < classes, "FashionMNIST: '",
              fashion_file(root, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte"), "' has label ",
              label(i), " for sample ", i, " (expected 0 to ", classes - 1, ")");
}

const std::vector<std::string>& FashionMNIST::classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace mdl::data
