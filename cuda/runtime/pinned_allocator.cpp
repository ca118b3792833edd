// Pinned (page-locked) host memory from cudaHostAlloc, cached by exact size: the data loader's
// batches land here so host-to-device copies run at full PCIe/NVLink speed. Its device is the CPU.
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/runtime/check.h"
#include "cuda/api.h"
#include "kernels/views.h"
#include "tensor/checked_size.h"

namespace mdl::cuda {

namespace {

class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    check_alloc_bytes(nbytes, "pin_memory");
    const size_t size = nbytes == 0 ? 64 : size_t(checked_round_up(int64_t(nbytes), 64, "pin_memory"));
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      CUDA_CHECK("pin_memory", cudaHostAlloc(&p, size, cudaHostAllocDefault));
    }
    size_of_[p] = size;
    ::mdl::detail::record_alloc(Device::cpu(), nbytes);
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = size_of_.find(p);
    if (it == size_of_.end()) return;
    free_[it->second].push_back(p);
    size_of_.erase(it);
    ::mdl::detail::record_free(Device::cpu(), nbytes);
  }
  Device device() const override { return Device::cpu(); }
  bool owns(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return size_of_.count(const_cast<void*>(p)) > 0;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, size_t> size_of_;
};

PinnedAllocator& pinned() {
  static auto* a = new PinnedAllocator;  // never destroyed: batches may outlive static destruction
  return *a;
}

}  // namespace

Allocator* pinned_allocator() {
  MDL_CHECK(is_available(), "pin_memory: no GPU found, pinned memory needs the CUDA driver");
  return &pinned();
}

Tensor pin_memory(const Tensor& x) {
  MDL_CHECK(x.defined() && x.device().is_cpu(), "pin_memory: expected a CPU tensor, got one on ",
            x.defined() ? x.device().str() : std::string("nothing (undefined)"));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(x.nbytes(), pinned_allocator());
  impl->shape = x.shape();
  impl->strides = contiguous_strides(x.shape());
  impl->dtype = x.dtype();
  Tensor out(impl);
  if (out.numel()) kernels::copy(Device::cpu(), out, x);
  return out;
}

bool is_pinned(const Tensor& x) {
  return x.defined() && x.device().is_cpu() && is_available() && pinned().owns(x.storage()->data());
}

}  // namespace mdl::cuda
