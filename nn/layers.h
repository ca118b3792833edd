// The basic layers: Linear, Conv2d, pooling, normalisation, activations, Dropout, Embedding,
// Flatten, Identity. Each owns its parameters (initialised as PyTorch does) and calls nn::functional.
#pragma once
#include "nn/functional.h"
#include "nn/module.h"

namespace mdl::nn {

using functional::Pair;

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight, bias;  // (out, in), (out)
  int64_t in_features, out_features;
};

struct Conv2dOptions {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel_size, Conv2dOptions opts = {});
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Conv2dOptions opts = {})
      : Conv2d(in_channels, out_channels, Pair{kernel_size, kernel_size}, opts) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight, bias;  // (out, in/groups, kH, kW), (out)
  int64_t in_channels, out_channels;
  Pair kernel_size;
  Conv2dOptions opts;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});
  explicit MaxPool2d(int64_t k) : MaxPool2d(Pair{k, k}) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Pair kernel, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Pair kernel, Pair stride = {0, 0}, Pair padding = {0, 0});
  explicit AvgPool2d(int64_t k) : AvgPool2d(Pair{k, k}) {}
  Tensor forward(const Tensor& x) override;
  Pair kernel, stride, padding;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size) : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  explicit AdaptiveAvgPool2d(int64_t s) : AdaptiveAvgPool2d(Pair{s, s}) {}
  Tensor forward(const Tensor& x) override;
  Pair output_size;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true);
  Tensor forward(const Tensor& x) override;
  // relu(bn(x)), called as the module (profiler range, summary entry): one pass per direction
  // (nn::functional::batch_norm_relu) while toggles::fused_bn_relu() is on and the module is not
  // kept in f32, else the module then a relu.
  Tensor forward_relu(const Tensor& x);
  // relu(bn(x) + residual), called as the module: one op (nn::functional::batch_norm_add_relu) while
  // toggles::fused_bn_add_relu() is on, the module is not kept in f32 and the residual matches x's
  // shape, dtype and device; else the module then add_relu (fused_add_relu) or an add and a relu.
  Tensor forward_add_relu(const Tensor& x, const Tensor& residual);
  std::string extra_repr() const override;
  // A loaded running_mean must be finite, running_var finite and >= 0, num_batches_tracked >= 0.
  void check_state_entry(const std::string& name, const Tensor& value) const override;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  int64_t num_features;
  double eps, momentum;

 private:
  Tensor normalize(const Tensor& x, bool relu, const Tensor& residual = Tensor());
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5) : LayerNorm(Shape{dim}, eps) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};

class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  int64_t num_groups, num_channels;
  double eps;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& index) override;
  std::string extra_repr() const override;
  Tensor weight;  // (num_embeddings, dim), N(0, 1)
  int64_t num_embeddings, embedding_dim;
};

// Flattens dims start_dim..end_dim (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  int64_t start_dim, end_dim;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : Module("GELU"), approximate(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override;
  std::string approximate;
};
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};
class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};
class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

}  // namespace mdl::nn
