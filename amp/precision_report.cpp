// precision_report: the f32 pass, one AMP pass per loss scale, and their comparison on the host in f64.
#include "amp/precision_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "ops/ops.h"
#include "tensor/autocast_mode.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"
#include "tensor/half.h"

namespace mdl::amp {
namespace {

// What one forward and backward gave, read back as f32.
struct Pass {
  std::vector<float> output;
  double loss = 0;
  std::vector<std::vector<float>> gradients;  // one per parameter; the scaled gradient
};

// The model's modes and its parameters' gradients, put back when the report is done.
class ModelStateGuard {
 public:
  ModelStateGuard(nn::Module& model, const NamedTensors& params) : modes_(model), params_(params) {
    for (const auto& [name, p] : params_) held_.push_back(p.grad());
  }
  ~ModelStateGuard() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].second.set_grad(held_[i]);
  }
  ModelStateGuard(const ModelStateGuard&) = delete;
  ModelStateGuard& operator=(const ModelStateGuard&) = delete;

 private:
  nn::TrainingModeGuard modes_;
  NamedTensors params_;
  std::vector<Tensor> held_;
};

class GradEnabledGuard {
 public:
  GradEnabledGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~GradEnabledGuard() { GradMode::set_enabled(prev_); }
  GradEnabledGuard(const GradEnabledGuard&) = delete;
  GradEnabledGuard& operator=(const GradEnabledGuard&) = delete;

 private:
  bool prev_;
};

// Forward under autocast in dtype (off for kF32), then backward of the loss times scale, computed
// in f32 as GradScaler::scale computes it.
Pass run_pass(nn::Module& model, const NamedTensors& params, const Tensor& input, const OutputLoss& loss_fn,
              DType dtype, double scale) {
  for (const auto& [name, p] : params) p.set_grad(Tensor());
  Tensor output, loss;
  {
    AutocastGuard autocast(dtype == kF32 ? kF16 : dtype, dtype != kF32);
    output = model(input);
    loss = loss_fn(output);
  }
  MDL_CHECK(loss.defined() && loss.numel() == 1, "amp::precision_report: the loss function returned ",
            loss.defined() ? shape_str(loss.shape()) : std::string("an undefined tensor"), "; expected a single value");
  const Tensor wide = loss.dtype() == kF64 ? loss : loss.to(kF32);
  (wide * scale).backward();
  Pass pass{output.detach().to_vector<float>(), wide.item<double>(), {}};
  for (const auto& [name, p] : params) {
    const Tensor g = p.grad();
    pass.gradients.push_back(g.defined() ? g.to_vector<float>() : std::vector<float>(size_t(p.numel()), 0.0f));
  }
  return pass;
}

// ||got / scale - want|| / ||want||; NaN when want is all zero.
double relative_error(const std::vector<float>& got, double scale, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) / scale - double(want[i]);
    diff += d * d, norm += double(want[i]) * double(want[i]);
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::numeric_limits<double>::quiet_NaN();
}

// The median and the maximum of the errors of the parameters with a nonzero f32 gradient; NaN
// when there are none, or when one of them is NaN.
std::pair<double, double> median_and_max(const std::vector<ParameterPrecision>& parameters) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> errors;
  for (const ParameterPrecision& p : parameters)
    if (p.nonzero > 0) {
      if (std::isnan(p.error)) return {kNaN, kNaN};
      errors.push_back(p.error);
    }
  if (errors.empty()) return {kNaN, kNaN};
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  return {n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2, errors.back()};
}

// Whether x is a value of dtype: a gradient value below the smallest normal counts as lost bits only
// if a 16-bit backward produced it (a gradient summed in f32, as linear's under amp_f32_grads, holds
// values no 16-bit dtype does) and it differs from the f32 value.
bool held_by(DType dtype, float x) {
  if (dtype == kF16) return float(Half(x)) == x;
  if (dtype == kBF16) return float(BFloat16(x)) == x;
  return true;
}

ScalePrecision compare_gradients(const NamedTensors& params, const Pass& reference, const Pass& amp, DType dtype,
                                 double scale) {
  const double tiny = smallest_normal(dtype);
  ScalePrecision s{.loss_scale = scale};
  int64_t values = 0, nonzero = 0, underflowed = 0, zeroed = 0, nonfinite = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float>&want = reference.gradients[i], &got = amp.gradients[i];
    ParameterPrecision p{.name = params[i].first, .values = int64_t(want.size())};
    for (size_t j = 0; j < want.size(); ++j) {
      if (!std::isfinite(got[j])) ++p.nonfinite;
      if (want[j] == 0.0f) continue;
      ++p.nonzero;
      const bool subnormal = std::abs(double(got[j])) < tiny && held_by(dtype, got[j]);
      if (got[j] == 0.0f || (subnormal && double(got[j]) / scale != double(want[j]))) ++p.underflowed;
      if (got[j] == 0.0f) ++p.zeroed;
    }
    p.error = relative_error(got, scale, want);
    values += p.values, nonzero += p.nonzero, underflowed += p.underflowed, zeroed += p.zeroed;
    nonfinite += p.nonfinite;
    s.parameters.push_back(std::move(p));
  }
  std::tie(s.median_error, s.max_error) = median_and_max(s.parameters);
  if (nonzero > 0)
    s.underflow_fraction = double(underflowed) / double(nonzero), s.zero_fraction = double(zeroed) / double(nonzero);
  if (values > 0) s.nonfinite_fraction = double(nonfinite) / double(values);
  return s;
}

}  // namespace

double smallest_normal(DType dtype) {
  switch (dtype) {
    case kF16: return std::ldexp(1.0, -14);
    case kBF16:
    case kF32: return double(std::numeric_limits<float>::min());
    case kF64: return std::numeric_limits<double>::min();
    default: MDL_FAIL("amp::smallest_normal: ", dtype_name(dtype), " is not a floating dtype");
  }
}

PrecisionReport precision_report(nn::Module& model, const Tensor& input, const OutputLoss& loss, DType dtype,
                                 const PrecisionOptions& options) {
  MDL_CHECK(dtype == kF16 || dtype == kBF16 || dtype == kF32,
            "amp::precision_report: dtype must be f16, bf16 or f32, got ", dtype_name(dtype));
  MDL_CHECK(loss, "amp::precision_report: no loss function");
  MDL_CHECK(!options.loss_scales.empty(), "amp::precision_report: no loss scale to run the backward at");
  for (double scale : options.loss_scales)
    MDL_CHECK(scale > 0 && std::isfinite(scale),
              "amp::precision_report: a loss scale must be positive and finite, got ", scale);
  NamedTensors params;
  for (auto& [name, p] : model.named_parameters())
    if (p.requires_grad()) params.emplace_back(name, p);
  MDL_CHECK(!params.empty(), "amp::precision_report: no parameter of ", model.type_name(), " requires grad");

  ModelStateGuard restore(model, params);
  GradEnabledGuard grad_enabled;
  model.eval();
  const Pass reference = run_pass(model, params, input, loss, kF32, 1.0);
  PrecisionReport report{.dtype = dtype};
  for (double scale : options.loss_scales) {
    const Pass amp = run_pass(model, params, input, loss, dtype, scale);
    if (report.at_scales.empty()) {
      report.output_error = relative_error(amp.output, 1.0, reference.output);
      report.loss_error = relative_error({float(amp.loss)}, 1.0, {float(reference.loss)});
    }
    report.at_scales.push_back(compare_gradients(params, reference, amp, dtype, scale));
  }
  return report;
}

}  // namespace mdl::amp
