// Tensor's autograd accessors: requires_grad, grad, grad_fn, detach.
#include "tensor/native.h"
#include "tensor/tensor.h"

namespace mdl {

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
  MDL_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient shape ", shape_str(g.defined() ? g.shape() : Shape{}),
            " does not match tensor shape ", shape_str(shape()));
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

}  // namespace mdl
