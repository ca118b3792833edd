// matmul with torch.matmul's rules and its backward: the gradient is two matmuls, summed over
// broadcast batch dims; 1-D operands become matrices through differentiable views.
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "ops/autocast.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl {

MDL_DIFFERENTIABLE_OPS("matmul");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = amp::autocast_lower(a_in, b_in);
  MDL_CHECK(a.defined() && b.defined(), "matmul: undefined tensor");
  MDL_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got shapes ",
            shape_str(a.shape()), " and ", shape_str(b.shape()));
  MDL_CHECK(a.size(-1) == (b.dim() == 1 ? b.size(0) : b.size(-2)), "matmul: shapes ", shape_str(a.shape()), " and ",
            shape_str(b.shape()), " cannot be multiplied");
  // 1-D operands become matrices through differentiable views, so the node sees >= 2-D only.
  if (a.dim() == 1 || b.dim() == 1) {
    Tensor x = a.dim() == 1 ? unsqueeze(a, 0) : a;
    Tensor y = b.dim() == 1 ? unsqueeze(b, 1) : b;
    Tensor r = matmul(x, y);
    if (a.dim() == 1) r = squeeze(r, -2);  // before -1: for 1-D @ 1-D, [1,1] -> [1] -> []
    if (b.dim() == 1) r = squeeze(r, -1);
    return r;
  }
  Tensor out = native::matmul(a, b);
  record_fn("matmul", {a, b}, {out}, {a, b}, [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
    Tensor ga, gb;
    if (n.needs(0)) ga = native::sum_to(native::matmul(g[0], native::transpose(n.saved(1), -1, -2)), sa);
    if (n.needs(1)) gb = native::sum_to(native::matmul(native::transpose(n.saved(0), -1, -2), g[0]), sb);
    return Grads{ga, gb};
  });
  return out;
}

}  // namespace mdl
