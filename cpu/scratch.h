// Scratch<T>: a kernel call's working memory (packed weights, unfolded columns, f32 partial sums).
// It comes from the CPU allocator, whose block cache hands a large block back to the next call of
// the same size, and it is not zero-filled. A std::vector of the same size is filled with zeros on
// every call, and once glibc has returned its block to the kernel, each of its pages faults again
// on first touch: on a virtual machine those faults and the fill cost more than a ResNet layer's
// arithmetic. The bytes count in memory_stats(), as a tensor's do.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tensor/allocator.h"

namespace mdl::cpu {

template <class T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  Scratch() = default;
  explicit Scratch(int64_t n) { resize(n); }
  Scratch(int64_t n, T value) : Scratch(n) { std::fill(data_, data_ + size_, value); }
  ~Scratch() { release(); }
  Scratch(Scratch&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  Scratch& operator=(Scratch&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // n elements whose values are unspecified: what the buffer held is kept only while n fits.
  void resize(int64_t n) {
    if (n > capacity_) {
      release();
      data_ = static_cast<T*>(cpu_allocator()->allocate(size_t(n) * sizeof(T)));
      capacity_ = n;
    }
    size_ = std::max<int64_t>(n, 0);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }

 private:
  void release() {
    if (data_) cpu_allocator()->deallocate(data_, size_t(capacity_) * sizeof(T));
    data_ = nullptr;
    size_ = capacity_ = 0;
  }
  T* data_ = nullptr;
  int64_t size_ = 0, capacity_ = 0;
};

}  // namespace mdl::cpu
