// Tensor: a cheap handle (shared_ptr<TensorImpl>) to storage viewed through shape, strides and
// an offset, with a dtype, a device and the fields autograd needs. Views share storage.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/memory_format.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace mdl {

namespace autograd {
class Node;
}

struct TensorOptions {
  DType dtype = kF32;
  Device device = Device::cpu();
  bool requires_grad = false;

  TensorOptions() = default;
  TensorOptions(DType t) : dtype(t) {}    // NOLINT: zeros({2}, kF16)
  TensorOptions(Device d) : device(d) {}  // NOLINT: zeros({2}, Device::cuda())
  TensorOptions(DType t, Device d, bool rg = false) : dtype(t), device(d), requires_grad(rg) {}
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kF32;

  // Autograd.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this is
  bool retains_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // Metadata.
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return numel() * element_size(); }
  bool is_contiguous() const;
  bool is_contiguous(MemoryFormat f) const;
  // The format an op's result keeps (tensor/memory_format.h, memory_format_of).
  MemoryFormat memory_format() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  const std::shared_ptr<Storage>& storage() const;
  std::string str() const;  // the values, PyTorch-style

  // Raw data at this view's offset. data_ptr<T>() checks T against the dtype.
  void* raw_data() const;
  template <class T>
  T* data_ptr() const {
    check_data_type(dtype_of<T>::value);
    return static_cast<T*>(raw_data());
  }

  // Views (no copy).
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else a copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a dim
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }

  // Copies and conversions.
  Tensor contiguous() const;
  Tensor contiguous(MemoryFormat f) const;  // same tensor when already in f
  Tensor clone() const;
  Tensor to(DType t) const;   // same tensor when already t
  Tensor to(Device d) const;  // same tensor when already on d
  Tensor to(Device d, DType t) const;
  Tensor cpu() const { return to(Device::cpu()); }
  template <class T>
  T item() const;
  template <class T>
  std::vector<T> to_vector() const;

  // In place; each bumps the storage's version counter.
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src, casts dtype, crosses devices
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(const Tensor& other) { return add_(other, -1.0); }
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double s);
  Tensor& div_(const Tensor& other);
  void bump_version() const;
  uint64_t version() const;

  // Autograd.
  bool requires_grad() const;
  Tensor& requires_grad_(bool r = true);
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  Tensor& zero_grad();  // drops .grad
  bool is_leaf() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  Tensor detach() const;     // shares storage, no history
  void retain_grad() const;  // keep .grad on a non-leaf
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;

 private:
  void check_data_type(DType t) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& s, const Tensor& t);

// Tensors with names, in order: state dicts, checkpoints.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Makes a tensor of `shape` over fresh storage on `device`, uninitialised.
Tensor make_tensor(const Shape& shape, DType dtype, Device device);
// The same, laid out in memory format f.
Tensor make_tensor(const Shape& shape, DType dtype, Device device, MemoryFormat f);
// Makes a view of `base`'s storage with the given geometry.
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace mdl
