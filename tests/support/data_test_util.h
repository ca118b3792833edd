// Helpers for the data and file tests: a self-removing temp folder, raw file writes, IDX file builders,
// the first images of Fashion-MNIST as a root of their own, a small synthetic ImageFolder of PNGs
// whose pixels encode (class, image) so batches are checkable, and one epoch of a loader as plain vectors.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/idx.h"
#include "data/image.h"
#include "data/loader.h"
#include "tensor/tensor.h"

namespace data_test {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag = "data") {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("mdl_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  // The names of the entries in the folder, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// An IDX file of unsigned bytes: magic 0 0 0x08 ndim, big-endian dims, then the payload.
inline std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b = {0, 0, 0x08, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(d >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// A folder holding the first n_train training and n_test test images and labels of Fashion-MNIST
// (data::kFashionMnistRoot's files) as raw IDX files: a root for data::FashionMNIST and for
// mdl-train's --data fashion-mnist:ROOT, for runs that need the real images but not all of them.
struct FashionMnistHead {
  TempDir dir{"fashion_mnist"};
  FashionMnistHead(int64_t n_train, int64_t n_test) {
    for (const auto& [name, n] : {std::pair<std::string, int64_t>{"train-images-idx3-ubyte", n_train},
                                  {"train-labels-idx1-ubyte", n_train},
                                  {"t10k-images-idx3-ubyte", n_test},
                                  {"t10k-labels-idx1-ubyte", n_test}}) {
      // Appended in place: g++ 12 at -O1 warns (falsely, -Warray-bounds) on the chained operator+.
      std::string path(mdl::data::kFashionMnistRoot);
      path.append("/").append(name).append(".gz");
      const mdl::data::IdxArray a = mdl::data::read_idx(path);
      if (n < 1 || n > a.dims[0])
        throw std::runtime_error("FashionMnistHead: " + name + " has no " + std::to_string(n) + " items");
      std::vector<uint32_t> dims(a.dims.begin(), a.dims.end());
      dims[0] = uint32_t(n);
      const size_t bytes = a.data.size() / size_t(a.dims[0]) * size_t(n);
      write_bytes(dir.file(name),
                  idx_bytes(dims, std::vector<uint8_t>(a.data.begin(), a.data.begin() + ptrdiff_t(bytes))));
    }
  }
  std::string root() const { return dir.path.string(); }
};

// The pixel value of image `i` of class `c` at (y, x, ch) in make_image_folder's images.
inline uint8_t pixel(int c, int i, int y, int x, int ch) { return uint8_t(c * 50 + i * 7 + y * 3 + x + ch * 11); }

// root/class_<c>/img_<i>.png: `classes` classes of `per_class` images, h x w, `channels` channels.
inline void make_image_folder(const fs::path& root, int classes, int per_class, int h, int w, int channels) {
  for (int c = 0; c < classes; ++c) {
    fs::create_directories(root / ("class_" + std::to_string(c)));
    for (int i = 0; i < per_class; ++i) {
      mdl::Tensor img = mdl::make_tensor({h, w, channels}, mdl::kU8, mdl::Device::cpu());
      uint8_t* p = img.data_ptr<uint8_t>();
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int ch = 0; ch < channels; ++ch) p[(y * w + x) * channels + ch] = pixel(c, i, y, x, ch);
      mdl::data::write_png((root / ("class_" + std::to_string(c)) / ("img_" + std::to_string(i) + ".png")).string(),
                           img);
    }
  }
}

// One epoch's batches as plain vectors, comparable with ==.
struct Epoch {
  std::vector<std::vector<float>> x;
  std::vector<std::vector<int64_t>> y;
  bool operator==(const Epoch&) const = default;
};

inline Epoch run_epoch(mdl::data::DataLoader& loader) {
  Epoch e;
  for (auto& [x, y] : loader) {
    e.x.push_back(x.to_vector<float>());
    e.y.push_back(y.to_vector<int64_t>());
  }
  return e;
}

}  // namespace data_test
