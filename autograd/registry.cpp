// The registry of ops with a backward. record() refuses an op missing here, and the gradcheck
// suite fails when an op listed here has no gradcheck entry: so no backward goes untested.
// Elementwise ops come from their lists in kernels/op_kinds.h (those marked differentiable);
// every other differentiable op is named once below.
#include "autograd/node.h"
#include "kernels/op_kinds.h"

namespace mdl::autograd {

const std::vector<std::string>& differentiable_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
#define MDL_ADD_IF_DIFFERENTIABLE(e, name, differentiable) \
  if (differentiable) v.push_back(name);
    MDL_BINARY_OPS(MDL_ADD_IF_DIFFERENTIABLE)
    MDL_UNARY_OPS(MDL_ADD_IF_DIFFERENTIABLE)
#undef MDL_ADD_IF_DIFFERENTIABLE
    for (const char* name : {// elementwise beyond the op kinds
                             "clamp", "where", "masked_fill",
                             // reductions
                             "sum", "mean", "max", "min", "max_dim", "min_dim", "var", "softmax", "log_softmax",
                             // views, copies, joining
                             "view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "expand", "slice",
                             "narrow", "select", "clone", "to_dtype", "to_device", "cat", "split", "tril", "triu",
                             // indexing, linear algebra
                             "index_select", "gather", "scatter_add", "matmul",
                             // nn: norms, dropout, embedding, losses, attention
                             "batch_norm", "layer_norm", "group_norm", "dropout", "embedding", "cross_entropy",
                             "bce_with_logits", "scaled_dot_product_attention",
                             // nn: linear, convolution, pooling
                             "linear", "linear_act", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"})
      v.push_back(name);
    return v;
  }();
  return ops;
}

}  // namespace mdl::autograd
