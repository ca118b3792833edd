// Batch buffers in pinned memory when CUDA can provide it (cuda::pinned_allocator), and in
// aligned memory with a per-size free list otherwise, so both paths reuse buffers alike.
#include "data/pinned.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cuda/api.h"
#include "tensor/checked_size.h"
#include "tensor/device.h"
#include "tensor/error.h"

namespace mdl::data {

namespace {

constexpr size_t kMaxCachedBytes = size_t(512) << 20;

// The fallback: aligned_alloc, with freed blocks cached by rounded size.
class ReusingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t rounded = rounded_size(nbytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(rounded);
      if (it != free_.end()) {
        p = it->second;
        free_.erase(it);
        cached_ -= rounded;
      }
    }
    if (!p) p = std::aligned_alloc(64, rounded);
    MDL_CHECK(p, "pin_memory: out of memory allocating ", nbytes, " bytes");
    detail::record_alloc(Device::cpu(), nbytes);
    return p;
  }

  void deallocate(void* p, size_t nbytes) override {
    detail::record_free(Device::cpu(), nbytes);
    const size_t rounded = rounded_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + rounded > kMaxCachedBytes) return std::free(p);
    free_.emplace(rounded, p);
    cached_ += rounded;
  }

  Device device() const override { return Device::cpu(); }

 private:
  static size_t rounded_size(size_t n) {
    check_alloc_bytes(n, "pin_memory");
    return size_t(std::max<int64_t>(checked_round_up(int64_t(n), 64, "pin_memory"), 64));
  }
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};

}  // namespace

bool pinned_memory_available() { return cuda::is_available(); }

Allocator* pinned_allocator() {
  if (pinned_memory_available()) return cuda::pinned_allocator();
  // Never destroyed: storages may be freed during static destruction; its blocks stay reachable.
  static ReusingAllocator* fallback = new ReusingAllocator;
  return fallback;
}

Tensor empty_pinned(const Shape& shape, DType dtype) {
  const int64_t nbytes = checked_nbytes(shape, dtype, "empty_pinned");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(nbytes), pinned_allocator());
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace mdl::data
