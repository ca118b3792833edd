// Storage: a reference-counted block of bytes on one device, owned through its allocator.
// Views share a Storage; its version counter lets autograd detect in-place changes.
#pragma once
#include <cstdint>
#include <memory>

#include "tensor/allocator.h"

namespace mdl {

class Storage {
 public:
  Storage(size_t nbytes, Allocator* alloc) : data_(alloc->allocate(nbytes)), nbytes_(nbytes), alloc_(alloc) {}
  ~Storage() { alloc_->deallocate(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return alloc_->device(); }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_;
  size_t nbytes_;
  Allocator* alloc_;
  uint64_t version_ = 0;
};

}  // namespace mdl
