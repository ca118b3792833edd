// Per-sample transforms. Layout convention: u8 images are HWC (or HW), floating images are CHW
// (ToTensor turns the first into the second); geometric transforms accept both. Random
// transforms draw only from the Generator they are given, which the DataLoader seeds from
// (seed, epoch, index), so augmentation never depends on thread timing.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/native/factory.h"
#include "tensor/tensor.h"

namespace mdl::data {

class Transform {
 public:
  virtual ~Transform() = default;
  virtual Tensor operator()(const Tensor& x, Generator& gen) const = 0;
  virtual bool is_random() const { return false; }
  // Names the transform and its parameters: part of the file-cache key.
  virtual std::string name() const = 0;
  // For use outside a loader; random transforms draw from a generator seeded with 0.
  Tensor apply(const Tensor& x) const {
    Generator g(0);
    return (*this)(x, g);
  }
};
using TransformPtr = std::shared_ptr<const Transform>;

// The generator for sample `index` in `epoch`: a hash of the three, so any worker can make it.
Generator sample_generator(uint64_t seed, int64_t epoch, int64_t index);

// u8 (H, W, C) or (H, W) to (C, H, W) in f32, f16 or bf16, scaled to [0, 1].
class ToTensor : public Transform {
 public:
  explicit ToTensor(DType dtype = kF32);
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  std::string name() const override;

 private:
  DType dtype_;
};

// (x - mean[c]) / std[c] on a floating (C, H, W); one value applies to every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  std::string name() const override;

 private:
  std::vector<double> mean_, std_;
};

// Pads `padding` zeros on every side, then cuts a random size x size window.
class RandomCrop : public Transform {
 public:
  RandomCrop(int64_t size, int64_t padding = 0);
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  bool is_random() const override { return true; }
  std::string name() const override;

 private:
  int64_t size_, padding_;
};

// Mirrors left-right with probability p.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  bool is_random() const override { return true; }
  std::string name() const override;

 private:
  double p_;
};

// Resamples to height x width with stb_image_resize (u8 HWC or f32 CHW).
class Resize : public Transform {
 public:
  Resize(int64_t height, int64_t width);
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  std::string name() const override;

 private:
  int64_t h_, w_;
};

// The central height x width window; zero padding where the image is smaller.
class CenterCrop : public Transform {
 public:
  CenterCrop(int64_t height, int64_t width);
  explicit CenterCrop(int64_t size) : CenterCrop(size, size) {}
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  std::string name() const override;

 private:
  int64_t h_, w_;
};

// Applies each transform in order; random when any of them is.
class Compose : public Transform {
 public:
  explicit Compose(std::vector<TransformPtr> transforms);
  Tensor operator()(const Tensor& x, Generator& gen) const override;
  bool is_random() const override;
  std::string name() const override;
  const std::vector<TransformPtr>& transforms() const { return transforms_; }

 private:
  std::vector<TransformPtr> transforms_;
};

}  // namespace mdl::data
