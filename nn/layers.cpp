// The basic layers: parameters initialised as PyTorch's defaults, forward through nn::functional.
#include "nn/layers.h"

#include <cmath>
#include <sstream>

#include "tensor/grad_mode.h"
#include "kernels/optim.h"
#include "nn/init.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"

namespace mdl::nn {

namespace F = functional;

namespace {
std::string pair_str(Pair p) {
  std::ostringstream s;
  s << "(" << p[0] << ", " << p[1] << ")";
  return s.str();
}
Pair or_kernel(Pair stride, Pair kernel) { return stride[0] == 0 && stride[1] == 0 ? kernel : stride; }
}  // namespace

// ---- Linear ---------------------------------------------------------------------------------
Linear::Linear(int64_t in, int64_t out, bool with_bias) : Module("Linear"), in_features(in), out_features(out) {
  MDL_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ", in, " and ", out);
  weight = register_parameter("weight", empty({out, in}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias) {
    bias = register_parameter("bias", empty({out}));
    double bound = 1.0 / std::sqrt(double(in));
    init::uniform_(bias, -bound, bound);
  }
}
Tensor Linear::forward(const Tensor& x) { return F::linear(x, weight, bias); }
std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

// ---- Conv2d ---------------------------------------------------------------------------------
Conv2d::Conv2d(int64_t in, int64_t out, Pair k, Conv2dOptions o)
    : Module("Conv2d"), in_channels(in), out_channels(out), kernel_size(k), opts(o) {
  MDL_CHECK(in > 0 && out > 0 && k[0] > 0 && k[1] > 0, "Conv2d: channels and kernel size must be positive");
  MDL_CHECK(o.groups > 0 && in % o.groups == 0 && out % o.groups == 0, "Conv2d: groups ", o.groups,
            " must divide in_channels ", in, " and out_channels ", out);
  weight = register_parameter("weight", empty({out, in / o.groups, k[0], k[1]}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (o.bias) {
    bias = register_parameter("bias", empty({out}));
    double bound = 1.0 / std::sqrt(double(in / o.groups * k[0] * k[1]));
    init::uniform_(bias, -bound, bound);
  }
}
Tensor Conv2d::forward(const Tensor& x) {
  return F::conv2d(x, weight, bias, opts.stride, opts.padding, opts.dilation, opts.groups);
}
std::string Conv2d::extra_repr() const {
  std::ostringstream s;
  s << in_channels << ", " << out_channels << ", kernel_size=" << pair_str(kernel_size)
    << ", stride=" << pair_str(opts.stride);
  if (opts.padding != Pair{0, 0}) s << ", padding=" << pair_str(opts.padding);
  if (opts.dilation != Pair{1, 1}) s << ", dilation=" << pair_str(opts.dilation);
  if (opts.groups != 1) s << ", groups=" << opts.groups;
  if (!bias.defined()) s << ", bias=false";
  return s.str();
}

// ---- pooling --------------------------------------------------------------------------------
MaxPool2d::MaxPool2d(Pair k, Pair s, Pair p) : Module("MaxPool2d"), kernel(k), stride(or_kernel(s, k)), padding(p) {}
Tensor MaxPool2d::forward(const Tensor& x) { return F::max_pool2d(x, kernel, stride, padding); }
std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + pair_str(kernel) + ", stride=" + pair_str(stride) + ", padding=" + pair_str(padding);
}
AvgPool2d::AvgPool2d(Pair k, Pair s, Pair p) : Module("AvgPool2d"), kernel(k), stride(or_kernel(s, k)), padding(p) {}
Tensor AvgPool2d::forward(const Tensor& x) { return F::avg_pool2d(x, kernel, stride, padding); }
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return F::adaptive_avg_pool2d(x, output_size); }

// ---- normalisation --------------------------------------------------------------------------
BatchNorm2d::BatchNorm2d(int64_t n, double eps, double momentum, bool affine)
    : Module("BatchNorm2d"), num_features(n), eps(eps), momentum(momentum) {
  MDL_CHECK(n > 0, "BatchNorm2d: num_features must be positive, got ", n);
  if (affine) {
    weight = register_parameter("weight", ones({n}));
    bias = register_parameter("bias", zeros({n}));
  }
  running_mean = register_buffer("running_mean", zeros({n}));
  running_var = register_buffer("running_var", ones({n}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kI64));
}
Tensor BatchNorm2d::forward(const Tensor& x) { return normalize(x, false); }

Tensor BatchNorm2d::forward_relu(const Tensor& x) {
  if (!toggles::fused_bn_relu() || keeps_f32()) return relu((*this)(x));
  return call_as_module(x, [this](const Tensor& in) { return normalize(in, true); });
}

Tensor BatchNorm2d::forward_add_relu(const Tensor& x, const Tensor& residual) {
  MDL_CHECK(residual.defined(), "BatchNorm2d::forward_add_relu: the residual is undefined");
  const bool fits = residual.shape() == x.shape() && residual.dtype() == x.dtype() && residual.device() == x.device();
  if (!toggles::fused_bn_add_relu() || keeps_f32() || !fits) {
    const Tensor y = (*this)(x);
    return toggles::fused_add_relu() ? add_relu(y, residual) : relu(y + residual);
  }
  return call_as_module(x, [&](const Tensor& in) { return normalize(in, true, residual); });
}

Tensor BatchNorm2d::normalize(const Tensor& x, bool relu, const Tensor& residual) {
  MDL_CHECK(x.dim() == 4 && x.size(1) == num_features, "BatchNorm2d: expected input (N, ", num_features,
            ", H, W), got shape ", shape_str(x.shape()));
  if (is_training()) {
    NoGradGuard no_grad;
    // One kernel on the buffer's device, the optimizers' step counter advance: no host-to-device
    // copy (which would stall the GPU and could not be captured in a CUDA Graph), no fill of a one.
    kernels::advance_steps(num_batches_tracked.device(), std::vector<Tensor>{num_batches_tracked}, Tensor());
    num_batches_tracked.bump_version();
  }
  if (residual.defined())
    return F::batch_norm_add_relu(x, residual, running_mean, running_var, weight, bias, is_training(), momentum, eps);
  return (relu ? F::batch_norm_relu : F::batch_norm)(x, running_mean, running_var, weight, bias, is_training(),
                                                     momentum, eps);
}
void BatchNorm2d::check_state_entry(const std::string& name, const Tensor& value) const {
  if (name != "running_mean" && name != "running_var" && name != "num_batches_tracked") return;
  const std::vector<double> v = value.to(Device::cpu()).to(kF64).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    const bool ok = name == "running_mean" ? std::isfinite(v[i]) : std::isfinite(v[i]) && v[i] >= 0;
    MDL_CHECK(ok, "BatchNorm2d: loaded ", name, "[", i, "] = ", v[i], " (",
              name == "running_mean" ? "must be finite" : "must be finite and >= 0", ")");
  }
}

std::string BatchNorm2d::extra_repr() const {
  std::ostringstream s;
  s << num_features << ", eps=" << eps << ", momentum=" << momentum;
  return s.str();
}

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : Module("LayerNorm"), normalized_shape(shape), eps(eps) {
  if (affine) {
    weight = register_parameter("weight", ones(shape));
    bias = register_parameter("bias", zeros(shape));
  }
}
Tensor LayerNorm::forward(const Tensor& x) { return F::layer_norm(x, normalized_shape, weight, bias, eps); }
std::string LayerNorm::extra_repr() const { return shape_str(normalized_shape); }

GroupNorm::GroupNorm(int64_t g, int64_t c, double eps, bool affine)
    : Module("GroupNorm"), num_groups(g), num_channels(c), eps(eps) {
  MDL_CHECK(g > 0 && c % g == 0, "GroupNorm: num_groups ", g, " must divide num_channels ", c);
  if (affine) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
}
Tensor GroupNorm::forward(const Tensor& x) { return F::group_norm(x, num_groups, weight, bias, eps); }

// ---- the rest -------------------------------------------------------------------------------
Dropout::Dropout(double p) : Module("Dropout"), p(p) {
  MDL_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}
Tensor Dropout::forward(const Tensor& x) { return F::dropout(x, p, is_training()); }
std::string Dropout::extra_repr() const { return "p=" + std::to_string(p); }

Embedding::Embedding(int64_t n, int64_t dim) : Module("Embedding"), num_embeddings(n), embedding_dim(dim) {
  MDL_CHECK(n > 0 && dim > 0, "Embedding: sizes must be positive, got ", n, " and ", dim);
  weight = register_parameter("weight", empty({n, dim}));
  init::normal_(weight);
}
Tensor Embedding::forward(const Tensor& index) { return F::embedding(index, weight); }
std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }
Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

}  // namespace mdl::nn
