// Tensor factories and the seeded random generator behind rand/randn/randint.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace mdl {

// Counter-based (Philox 4x32-10) generator: element i of a draw depends on (seed, offset + i)
// only, so results do not depend on thread count, and a CUDA kernel can draw the same numbers.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  // Reserves n counters; returns the first.
  uint64_t advance(uint64_t n) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t o) { offset_ = o; }
  // Four 32-bit random words for counter c.
  static std::array<uint32_t, 4> philox(uint64_t seed, uint64_t counter, uint64_t subsequence = 0);
  uint64_t next_u64();
  double next_double();  // uniform [0, 1)

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
// An integer dtype takes value as PyTorch stores a Python number (native::integer_value: -1 into u8
// is 255; past the width, an mdl::Error).
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor scalar_tensor(double value, TensorOptions opts = {});  // 0-dim
// start, start + step, ... before end; an integer dtype takes whole start and step and computes in
// int64 (exact past 2^53, wrapping into narrower dtypes as a cast does).
Tensor arange(double end, TensorOptions opts = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions opts = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor eye(int64_t n, TensorOptions opts = {});
// Uniform [0, 1), standard normal, and integers in [low, high) (drawn in int64; a range an integer
// dtype cannot hold is an mdl::Error).
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = kI64, Generator* gen = nullptr);
// A random permutation of 0..n-1 (I64).
Tensor randperm(int64_t n, Generator* gen = nullptr);

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

// Copies values into a new tensor; shape defaults to 1-D of the vector's length.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {}, TensorOptions opts = dtype_of<T>::value);
// Copies numel(shape) elements of dtype opts.dtype from ptr.
Tensor from_blob(const void* ptr, const Shape& shape, TensorOptions opts = {});

}  // namespace mdl
