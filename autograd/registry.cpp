// The registry of ops with a backward. record() refuses an op missing here, and the gradcheck
// suite fails when an op listed here has no gradcheck entry: so no backward goes untested.
#include "autograd/node.h"

namespace mdl::autograd {

const std::vector<std::string>& differentiable_ops() {
  static const std::vector<std::string> ops = {
      // elementwise
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin",
      "cos", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "square", "clamp", "where", "masked_fill",
      // reductions
      "sum", "mean", "max", "min", "max_dim", "min_dim", "var", "softmax", "log_softmax",
      // views, copies, joining
      "view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "expand", "slice", "narrow", "select",
      "clone", "to_dtype", "to_device", "cat", "tril", "triu",
      // indexing, linear algebra
      "index_select", "gather", "scatter_add", "matmul",
      // nn: norms, dropout, embedding, losses
      "batch_norm", "layer_norm", "group_norm", "dropout", "embedding", "cross_entropy", "bce_with_logits",
      "scaled_dot_product_attention",
      // nn: linear, convolution, pooling
      "linear", "linear_act", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
  };
  return ops;
}

}  // namespace mdl::autograd
