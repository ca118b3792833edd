// Indexing ops with their backward: gathers scatter the gradient back, scatters gather it.
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "ops/native/factory.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl {

MDL_DIFFERENTIABLE_OPS("index_select", "gather", "scatter_add");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = native::index_select(x, dim, index);
  record_fn("index_select", {x}, {out}, {index}, [dim, s = x.shape()](const Grads& g, const FnNode& n) {
    Tensor zero = zeros(s, {g[0].dtype(), g[0].device()});
    return Grads{native::index_add(zero, dim, n.saved(0), g[0])};
  });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = native::gather(x, dim, index);
  record_fn("gather", {x}, {out}, {index}, [dim, s = x.shape()](const Grads& g, const FnNode& n) {
    Tensor zero = zeros(s, {g[0].dtype(), g[0].device()});
    return Grads{native::scatter_add(zero, dim, n.saved(0), g[0])};
  });
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = native::scatter_add(x, dim, index, src);
  record_fn("scatter_add", {x, src}, {out}, {index}, [dim](const Grads& g, const FnNode& n) {
    return Grads{g[0], n.needs(1) ? native::gather(g[0], dim, n.saved(0)) : Tensor()};
  });
  return out;
}

}  // namespace mdl
