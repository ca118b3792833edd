// torch.nn.init, written out: bounds and standard deviations from fans and gains.
#include "nn/init.h"

#include <algorithm>
#include <cmath>

#include "tensor/grad_mode.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl::nn::init {

Fans compute_fans(const Tensor& t) {
  MDL_CHECK(t.dim() >= 2, "init: fan in and fan out need a tensor with at least 2 dims, got shape ",
            shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "conv2d" || nl == "sigmoid" || nl == "identity") return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 0.75;
  MDL_FAIL("init: unknown nonlinearity '", nl, "'");
}

namespace {
void assign(const Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  native::copy_(t, values);
  t.bump_version();
}
}  // namespace

void uniform_(const Tensor& t, double lo, double hi, Generator* gen) {
  Tensor r = rand(t.shape(), {kF64, Device::cpu()}, gen);
  assign(t, native::binary(BinaryOp::Add, native::binary(BinaryOp::Mul, r, scalar_tensor(hi - lo, kF64)),
                           scalar_tensor(lo, kF64)));
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  Tensor r = randn(t.shape(), {kF64, Device::cpu()}, gen);
  assign(t, native::binary(BinaryOp::Add, native::binary(BinaryOp::Mul, r, scalar_tensor(std, kF64)),
                           scalar_tensor(mean, kF64)));
}

void constant_(const Tensor& t, double v) {
  native::fill_(t, v);
  t.bump_version();
}
void zeros_(const Tensor& t) { constant_(t, 0.0); }
void ones_(const Tensor& t) { constant_(t, 1.0); }

void trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  MDL_CHECK(a < b, "trunc_normal_: empty interval [", a, ", ", b, "]");
  Generator& g = gen ? *gen : default_generator();
  Tensor v = make_tensor(t.shape(), kF64, Device::cpu());
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < v.numel(); ++i) {
    double x;
    int tries = 0;
    do {  // Box-Muller draws until inside [a, b]
      double u1 = (double(g.next_u64() >> 11) + 0.5) * 0x1.0p-53, u2 = g.next_double();
      x = mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    } while ((x < a || x > b) && ++tries < 1000);
    p[i] = std::clamp(x, a, b);
  }
  assign(t, v);
}

namespace {
double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  MDL_CHECK(mode == "fan_in" || mode == "fan_out", "kaiming init: mode must be fan_in or fan_out, got '", mode, "'");
  Fans f = compute_fans(t);
  int64_t fan = mode == "fan_in" ? f.fan_in : f.fan_out;
  MDL_CHECK(fan > 0, "kaiming init: zero fan for shape ", shape_str(t.shape()));
  return calculate_gain(nl, a) / std::sqrt(double(fan));
}
}  // namespace

void kaiming_uniform_(const Tensor& t, double a, const std::string& mode, const std::string& nl, Generator* gen) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& t, double a, const std::string& mode, const std::string& nl, Generator* gen) {
  normal_(t, 0.0, kaiming_std(t, a, mode, nl), gen);
}

void xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  Fans f = compute_fans(t);
  double bound = gain * std::sqrt(6.0 / double(f.fan_in + f.fan_out));
  uniform_(t, -bound, bound, gen);
}

void xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  Fans f = compute_fans(t);
  normal_(t, 0.0, gain * std::sqrt(2.0 / double(f.fan_in + f.fan_out)), gen);
}

}  // namespace mdl::nn::init
