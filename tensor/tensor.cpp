// Tensor's methods: metadata, raw access, conversions, item/to_vector and printing.
// View and arithmetic methods forward to the public ops so autograd sees them.
#include "tensor/tensor.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "autograd/grad_mode.h"
#include "tensor/factory.h"
#include "tensor/native.h"
#include "tensor/ops.h"

namespace mdl {

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& p) {
  MDL_CHECK(p, "tensor: use of an undefined tensor");
  return *p;
}
}  // namespace

Tensor make_tensor(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) MDL_CHECK(d >= 0, "tensor: negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), allocator_for(device));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
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

void Tensor::bump_version() const { storage()->bump_version(); }
uint64_t Tensor::version() const { return storage()->version(); }

// ---- views and conversions -------------------------------------------------------------
Tensor Tensor::view(const Shape& s) const { return mdl::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return mdl::reshape(*this, s); }
Tensor Tensor::flatten(int64_t a, int64_t b) const { return mdl::flatten(*this, a, b); }
Tensor Tensor::permute(const Shape& d) const { return mdl::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return mdl::transpose(*this, a, b); }
Tensor Tensor::t() const {
  MDL_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", shape_str(shape()));
  return transpose(0, 1);
}
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t step) const { return mdl::slice(*this, d, s, e, step); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t len) const { return mdl::narrow(*this, d, s, len); }
Tensor Tensor::select(int64_t d, int64_t i) const { return mdl::select(*this, d, i); }
Tensor Tensor::squeeze() const { return mdl::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return mdl::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return mdl::unsqueeze(*this, d); }
Tensor Tensor::expand(const Shape& s) const { return mdl::expand(*this, s); }
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : mdl::clone(*this); }
Tensor Tensor::clone() const { return mdl::clone(*this); }
Tensor Tensor::to(DType t) const { return dtype() == t ? *this : mdl::to_dtype(*this, t); }
Tensor Tensor::to(Device d) const { return device() == d ? *this : mdl::to_device(*this, d); }
Tensor Tensor::to(Device d, DType t) const { return to(t).to(d); }

template <class T>
T Tensor::item() const {
  MDL_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape_str(shape()));
  Tensor c = native::to_dtype(native::to_device(*this, Device::cpu()), dtype_of<T>::value);
  return *static_cast<const T*>(c.raw_data());
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = native::contiguous(native::to_dtype(native::to_device(*this, Device::cpu()), dtype_of<T>::value));
  const T* p = static_cast<const T*>(c.raw_data());
  return std::vector<T>(p, p + c.numel());
}

#define MDL_INSTANTIATE(T) template T Tensor::item<T>() const; template std::vector<T> Tensor::to_vector<T>() const;
MDL_INSTANTIATE(float) MDL_INSTANTIATE(double) MDL_INSTANTIATE(Half) MDL_INSTANTIATE(BFloat16)
MDL_INSTANTIATE(int32_t) MDL_INSTANTIATE(int64_t) MDL_INSTANTIATE(uint8_t) MDL_INSTANTIATE(bool)
#undef MDL_INSTANTIATE

// ---- in place ---------------------------------------------------------------------------
// In-place ops are not recorded by autograd: refuse them where a gradient would be lost.
namespace {
void check_inplace(const Tensor& self, const Tensor* other, const char* op) {
  if (!GradMode::is_enabled()) return;
  MDL_CHECK(!self.requires_grad(), op, ": in-place operation on a tensor that requires grad (shape ",
            shape_str(self.shape()), "); use the out-of-place op, or run it under NoGradGuard");
  MDL_CHECK(!other || !other->requires_grad(), op, ": in-place operation with an argument that requires grad; "
            "its gradient would be lost (use the out-of-place op)");
}
}  // namespace

Tensor& Tensor::fill_(double v) {
  check_inplace(*this, nullptr, "fill_");
  native::fill_(*this, v);
  bump_version();
  return *this;
}
Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, &src, "copy_");
  native::copy_(*this, src);
  bump_version();
  return *this;
}
Tensor& Tensor::add_(const Tensor& o, double alpha) {
  check_inplace(*this, &o, "add_");
  Tensor r = native::binary(BinaryOp::Add, *this, alpha == 1.0 ? o : native::binary(BinaryOp::Mul, o, native::scalar_like(alpha, o)));
  return copy_(r);
}
Tensor& Tensor::mul_(const Tensor& o) { return copy_(native::binary(BinaryOp::Mul, *this, o)); }
Tensor& Tensor::mul_(double s) { return copy_(native::binary(BinaryOp::Mul, *this, native::scalar_like(s, *this))); }
Tensor& Tensor::div_(const Tensor& o) { return copy_(native::binary(BinaryOp::Div, *this, o)); }

// ---- printing ---------------------------------------------------------------------------
namespace {
void print_rec(std::ostream& s, const std::vector<double>& v, const Shape& sh, size_t d, int64_t& pos,
               bool integral, int indent) {
  if (d == sh.size()) {
    double x = v[size_t(pos++)];
    if (integral) s << int64_t(x);
    else if (std::isnan(x)) s << "nan";
    else if (std::isinf(x)) s << (x > 0 ? "inf" : "-inf");
    else s << std::setprecision(5) << x;
    return;
  }
  s << "[";
  for (int64_t i = 0; i < sh[d]; ++i) {
    if (i) {
      s << ",";
      if (d + 1 < sh.size()) s << "\n" << std::string(size_t(indent + 1), ' ');
      else s << " ";
    }
    if (sh[d] > 64 && i == 3) {  // summarise long dims
      s << "...";
      int64_t skip = (sh[d] - 6) * shape_numel(Shape(sh.begin() + int64_t(d) + 1, sh.end()));
      pos += skip;
      i = sh[d] - 4;
      continue;
    }
    print_rec(s, v, sh, d + 1, pos, integral, indent + 1);
  }
  s << "]";
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream s;
  s << "tensor(";
  std::vector<double> v = to_vector<double>();
  int64_t pos = 0;
  print_rec(s, v, shape(), 0, pos, !is_floating_point(), 7);
  s << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) s << ", device=" << device();
  if (requires_grad()) s << ", requires_grad=true";
  s << ")";
  return s.str();
}

std::ostream& operator<<(std::ostream& s, const Tensor& t) { return s << t.str(); }

}  // namespace mdl
