// Parameter initialisation, in place, matching PyTorch's torch.nn.init (fan computed the same way).
#pragma once
#include <string>

#include "ops/native/factory.h"
#include "tensor/tensor.h"

namespace mdl::nn::init {

struct Fans {
  int64_t fan_in, fan_out;
};
Fans compute_fans(const Tensor& t);  // (out, in, *kernel): fan_in = in * prod(kernel)
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

// The random fills write floating tensors only and refuse lo > hi, std < 0 and non-finite
// arguments (mdl::Error), as PyTorch's.
void uniform_(const Tensor& t, double lo = 0.0, double hi = 1.0, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
// Normal(mean, std) truncated to [a, b], sampled by inverse CDF as torch.nn.init.trunc_normal_ (one
// draw per element, exact however little of the normal's mass lies in [a, b]).
void trunc_normal_(const Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                   Generator* gen = nullptr);
// mode "fan_in" or "fan_out"; nonlinearity "leaky_relu" (with a) or "relu", "linear", ...
void kaiming_uniform_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                      const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
void kaiming_normal_(const Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
void xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);
void xavier_normal_(const Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace mdl::nn::init
