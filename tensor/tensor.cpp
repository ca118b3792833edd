// Tensor's core methods: metadata, raw access, contiguity and versions. The methods that run ops
// (views, conversions, in-place arithmetic, item, printing) and the autograd accessors are in
// ops/tensor_methods.cpp, above the ops they call.
#include "tensor/tensor.h"

#include "tensor/checked_size.h"

namespace mdl {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& p) {
  MDL_CHECK(p, "tensor: use of an undefined tensor");
  return *p;
}
}  // namespace

Tensor make_tensor(const Shape& shape, DType dtype, Device device) {
  const int64_t nbytes = checked_nbytes(shape, dtype, "tensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(nbytes), allocator_for(device));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_tensor(const Shape& shape, DType dtype, Device device, MemoryFormat f) {
  Tensor t = make_tensor(shape, dtype, device);
  if (f != MemoryFormat::Contiguous) t.impl()->strides = strides_for(shape, f);
  return t;
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  checked_numel(shape, "view");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

const Shape& Tensor::shape() const { return checked(impl_).shape; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::size(int64_t d) const {
  MDL_CHECK(dim() > 0, "size: a 0-dim tensor has no dim ", d);
  return shape()[size_t(wrap_dim(d, dim(), "size"))];
}
int64_t Tensor::stride(int64_t d) const {
  MDL_CHECK(dim() > 0, "stride: a 0-dim tensor has no dim ", d);
  return strides()[size_t(wrap_dim(d, dim(), "stride"))];
}
int64_t Tensor::dim() const { return int64_t(shape().size()); }
int64_t Tensor::numel() const { return shape_numel(shape()); }
int64_t Tensor::offset() const { return checked(impl_).offset; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_).storage; }
void* Tensor::raw_data() const {
  const TensorImpl& t = checked(impl_);
  return static_cast<char*>(t.storage->data()) + t.offset * int64_t(dtype_size(t.dtype));
}
void Tensor::check_data_type(DType t) const {
  MDL_CHECK(dtype() == t, "data_ptr: tensor has dtype ", dtype(), ", asked for ", t);
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  const Shape& sh = shape();
  const Shape& st = strides();
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] != expected) return sh[i] == 0 || numel() == 0;
    expected *= sh[i];
  }
  return true;
}

bool Tensor::is_contiguous(MemoryFormat f) const { return has_memory_format(shape(), strides(), f); }

MemoryFormat Tensor::memory_format() const { return memory_format_of(shape(), strides()); }

void Tensor::bump_version() const { storage()->bump_version(); }
uint64_t Tensor::version() const { return storage()->version(); }

}  // namespace mdl
