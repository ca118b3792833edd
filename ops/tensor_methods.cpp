// Tensor's methods that run ops: views and conversions (through the public ops, so autograd sees
// them), item/to_vector, in-place arithmetic, printing, the autograd accessors (requires_grad,
// grad, grad_fn, detach) and backward. The metadata methods are in tensor/tensor.cpp.
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <type_traits>

#include "autograd/node.h"
#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace mdl {

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
Tensor Tensor::contiguous(MemoryFormat f) const { return mdl::contiguous(*this, f); }
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

#define MDL_INSTANTIATE(T)            \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
#define MDL_INSTANTIATE_DTYPE(e, T, DT, name, size) MDL_INSTANTIATE(T)
MDL_DTYPES(MDL_INSTANTIATE_DTYPE)
#undef MDL_INSTANTIATE_DTYPE
#undef MDL_INSTANTIATE

// ---- in place ---------------------------------------------------------------------------
// In-place ops are not recorded by autograd: refuse them where a gradient would be lost.
namespace {
void check_inplace(const Tensor& self, const Tensor* other, const char* op) {
  if (!GradMode::is_enabled()) return;
  MDL_CHECK(!self.requires_grad(), op, ": in-place operation on a tensor that requires grad (shape ",
            shape_str(self.shape()), "); use the out-of-place op, or run it under NoGradGuard");
  MDL_CHECK(!other || !other->requires_grad(), op,
            ": in-place operation with an argument that requires grad; "
            "its gradient would be lost (use the out-of-place op)");
}
// An in-place result is written back in self's dtype: refused where that would truncate it, as
// PyTorch refuses (a float result into an integer tensor, anything but bool into a bool one).
const Tensor& inplace_result(const Tensor& self, const Tensor& r, const char* op) {
  const bool truncates = (is_floating(r.dtype()) && !is_floating(self.dtype())) ||
                         (self.dtype() == kBool && r.dtype() != kBool);
  MDL_CHECK(!truncates, op, ": the result's dtype ", r.dtype(), " cannot be written into the ", self.dtype(),
            " tensor in place (use the out-of-place op, or convert the tensor first)");
  return r;
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
  Tensor r = native::binary(BinaryOp::Add, *this,
                            alpha == 1.0 ? o : native::binary(BinaryOp::Mul, o, native::scalar_operand(alpha, o)));
  return copy_(inplace_result(*this, r, "add_"));
}
Tensor& Tensor::mul_(const Tensor& o) {
  check_inplace(*this, &o, "mul_");
  return copy_(inplace_result(*this, native::binary(BinaryOp::Mul, *this, o), "mul_"));
}
Tensor& Tensor::mul_(double s) {
  check_inplace(*this, nullptr, "mul_");
  return copy_(inplace_result(*this, native::binary(BinaryOp::Mul, *this, native::scalar_operand(s, *this)), "mul_"));
}
Tensor& Tensor::div_(const Tensor& o) {
  check_inplace(*this, &o, "div_");
  return copy_(inplace_result(*this, native::binary(BinaryOp::Div, *this, o), "div_"));
}

// ---- printing ---------------------------------------------------------------------------
namespace {
// Integer dtypes print from int64 values (exact past 2^53), floating ones from double.
template <class V>
void print_rec(std::ostream& s, const std::vector<V>& v, const Shape& sh, size_t d, int64_t& pos, int indent) {
  if (d == sh.size()) {
    const V x = v[size_t(pos++)];
    if constexpr (std::is_integral_v<V>) s << x;
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
    print_rec(s, v, sh, d + 1, pos, indent + 1);
  }
  s << "]";
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream s;
  s << "tensor(";
  int64_t pos = 0;
  if (is_floating_point()) print_rec(s, to_vector<double>(), shape(), 0, pos, 7);
  else print_rec(s, to_vector<int64_t>(), shape(), 0, pos, 7);
  s << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) s << ", device=" << device();
  if (requires_grad()) s << ", requires_grad=true";
  s << ")";
  return s.str();
}

std::ostream& operator<<(std::ostream& s, const Tensor& t) { return s << t.str(); }

// ---- autograd accessors ---------------------------------------------------------------
bool Tensor::requires_grad() const { return impl() && impl()->requires_grad; }

Tensor& Tensor::requires_grad_(bool r) {
  MDL_CHECK(defined(), "requires_grad_: undefined tensor");
  MDL_CHECK(!r || is_floating(dtype()), "requires_grad_: only floating tensors can require gradients, got ", dtype());
  MDL_CHECK(r || !impl()->grad_fn, "requires_grad_: cannot turn off gradients of a non-leaf tensor; use detach()");
  impl()->requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const { return impl() && impl()->grad ? Tensor(impl()->grad) : Tensor(); }
void Tensor::set_grad(const Tensor& g) const {
  MDL_CHECK(defined(), "set_grad: undefined tensor");
  MDL_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient shape ",
            shape_str(g.defined() ? g.shape() : Shape{}), " does not match tensor shape ", shape_str(shape()));
  impl()->grad = g.impl_ptr();
}
Tensor& Tensor::zero_grad() {
  if (impl()) impl()->grad.reset();
  return *this;
}
bool Tensor::is_leaf() const { return !impl() || !impl()->grad_fn; }
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return impl() ? impl()->grad_fn : none;
}
Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }
void Tensor::retain_grad() const {
  MDL_CHECK(requires_grad(), "retain_grad: tensor does not require grad");
  impl()->retains_grad = true;
}

// Backpropagates from this tensor (autograd/engine.cpp runs the graph).
void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  MDL_CHECK(defined(), "backward: undefined tensor");
  MDL_CHECK(requires_grad(), "backward: tensor of shape ", shape_str(shape()),
            " does not require grad and has no grad_fn (call requires_grad_() on the inputs first)");
  Tensor g = grad_output;
  if (!g.defined()) {
    MDL_CHECK(numel() == 1, "backward: grad can be implicitly created only for scalar outputs; this output has shape ",
              shape_str(shape()), ", pass grad_output");
    g = native::to_dtype(native::reshape(native::scalar_like(1.0, *this), shape()), dtype());
  }
  MDL_CHECK(g.shape() == shape(), "backward: grad_output of shape ", shape_str(g.shape()),
            " does not match the output's shape ", shape_str(shape()));
  MDL_CHECK(g.device() == device(), "backward: grad_output on ", g.device(), " but the output is on ", device());
  autograd::run_backward({*this}, {g}, retain_graph);
}

}  // namespace mdl
