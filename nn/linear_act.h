// The fused linear layer y = act(x @ w^T + b), act none / relu / gelu (tanh approximation): one
// GEMM whose epilogue adds the bias and applies the activation (cuBLASLt on CUDA), instead of a
// matmul, an add and an activation op that each pass over the output. LinearAct is the module:
// its parameters are named and initialised as Linear's, so checkpoints match a PyTorch
// nn.Linear followed by the activation.
#pragma once
#include <string>

#include "nn/module.h"
#include "kernels/activation.h"

namespace mdl::nn {

namespace functional {
// x (*, in), w (out, in), b (out) or undefined -> (*, out). Same checks and autocast as linear.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, Activation act);
}  // namespace functional

class LinearAct : public Module {
 public:
  LinearAct(int64_t in_features, int64_t out_features, Activation act, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight, bias;  // (out, in), (out)
  int64_t in_features, out_features;
  Activation activation;
};

}  // namespace mdl::nn
