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
  for (const char* linear_like : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                  "conv_transpose3d", "sigmoid", "identity"})
    if (nl == linear_like) return 1.0;
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

// The random fills write floating tensors only, as PyTorch's.
void check_floating(const Tensor& t, const char* fn) {
  MDL_CHECK(t.defined(), fn, ": undefined tensor");
  MDL_CHECK(is_floating(t.dtype()), fn, ": expected a floating tensor, got ", t.dtype());
}
}  // namespace

void uniform_(const Tensor& t, double lo, double hi, Generator* gen) {
  check_floating(t, "uniform_");
  MDL_CHECK(std::isfinite(lo) && std::isfinite(hi), "uniform_: bounds must be finite, got [", lo, ", ", hi, ")");
  MDL_CHECK(lo <= hi, "uniform_: lower bound ", lo, " above upper bound ", hi);
  Tensor r = rand(t.shape(), {kF64, Device::cpu()}, gen);
  assign(t, native::binary(BinaryOp::Add, native::binary(BinaryOp::Mul, r, scalar_tensor(hi - lo, kF64)),
                           scalar_tensor(lo, kF64)));
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "normal_");
  MDL_CHECK(std::isfinite(mean), "normal_: mean must be finite, got ", mean);
  MDL_CHECK(std >= 0 && std::isfinite(std), "normal_: std must be finite and >= 0, got ", std);
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

namespace {
// Φ, the standard normal CDF; erfc keeps its relative precision far into the lower tail.
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Φ⁻¹(p) for p in (0, 1): Acklam's rational approximation (relative error 1.2e-9), then one
// Halley step on Φ(x) = p, which brings it to double precision.
double normal_quantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double p_low = 0.02425;
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  };
  double x;
  if (p < p_low) {
    x = tail(std::sqrt(-2.0 * std::log(p)));
  } else if (p <= 1.0 - p_low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    x = -tail(std::sqrt(-2.0 * std::log1p(-p)));
  }
  const double e = normal_cdf(x) - p, u = e * std::sqrt(2.0 * M_PI) * std::exp(0.5 * x * x);
  return x - u / (1.0 + 0.5 * x * u);
}
}  // namespace

// Inverse-CDF sampling, as torch.nn.init.trunc_normal_: u uniform between Φ(α) and Φ(β), x = Φ⁻¹(u),
// one draw per element. An interval above the mean is sampled mirrored below it, where Φ keeps its
// precision, so intervals far in a tail are exact too.
void trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_floating(t, "trunc_normal_");
  MDL_CHECK(std::isfinite(mean) && std::isfinite(std) && std > 0,
            "trunc_normal_: needs a finite mean and std > 0, got mean ", mean, ", std ", std);
  MDL_CHECK(a < b, "trunc_normal_: empty interval [", a, ", ", b, "]");
  const bool mirrored = (a - mean) + (b - mean) > 0;
  const double lo = mirrored ? (mean - b) / std : (a - mean) / std, hi = mirrored ? (mean - a) / std : (b - mean) / std;
  const double cdf_lo = normal_cdf(lo), cdf_hi = normal_cdf(hi);
  MDL_CHECK(cdf_hi > 0, "trunc_normal_: [", a, ", ", b, "] lies so far from the mean ", mean, " (std ", std,
            ") that its probability underflows");
  Generator& g = gen ? *gen : default_generator();
  Tensor v = make_tensor(t.shape(), kF64, Device::cpu());
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < v.numel(); ++i) {
    const double u = (double(g.next_u64() >> 11) + 0.5) * 0x1.0p-53;  // in (0, 1)
    const double z = normal_quantile(cdf_lo + (cdf_hi - cdf_lo) * u);
    p[i] = std::clamp(mirrored ? mean - std * z : mean + std * z, a, b);  // the clamp only absorbs rounding
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
