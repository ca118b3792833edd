// GradScaler: scale, the fused unscale-and-check per gradient, the skipped step, the scale update,
// and its state dict.
#include "amp/grad_scaler.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/error.h"
#include "ops/factory.h"
#include "kernels/amp.h"
#include "ops/ops.h"
#include "optim/state_values.h"

namespace mdl::amp {
namespace {

// The loss is multiplied by the scale in f32 and the gradients by its inverse: both are f32 numbers
// only while the scale stays in f32's normal range. Below it the scaled loss rounds to 0 and every
// step would see zero (or NaN) gradients.
constexpr double kMinScale = std::numeric_limits<float>::min();  // 2^-126
constexpr double kMaxScale = std::numeric_limits<float>::max();
bool scale_valid(double s) { return s >= kMinScale && s <= kMaxScale; }

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : opt_(options), scale_(options.init_scale) {
  MDL_CHECK(scale_valid(opt_.init_scale), "GradScaler: init_scale must be positive and finite, in f32's normal range [",
            kMinScale, ", ", kMaxScale, "], got ", opt_.init_scale);
  MDL_CHECK(opt_.growth_factor > 1.0 && std::isfinite(opt_.growth_factor),
            "GradScaler: growth_factor must be finite and greater than 1, got ", opt_.growth_factor);
  MDL_CHECK(opt_.backoff_factor > 0.0 && opt_.backoff_factor < 1.0,
            "GradScaler: backoff_factor must be in (0, 1), got ", opt_.backoff_factor);
  MDL_CHECK(opt_.growth_interval >= 1, "GradScaler: growth_interval must be at least 1, got ", opt_.growth_interval);
}

double GradScaler::get_scale() const { return opt_.enabled ? scale_ : 1.0; }

Tensor GradScaler::scale(const Tensor& loss) const {
  MDL_CHECK(loss.defined(), "GradScaler.scale: the loss is undefined");
  MDL_CHECK(loss.is_floating_point(), "GradScaler.scale: expected a floating loss, got ", loss.dtype());
  if (!opt_.enabled) return loss;
  // In f32, as PyTorch multiplies by its f32 scale tensor: an f16 loss times 65536 would overflow.
  const Tensor wide = loss.dtype() == kF64 ? loss : to_dtype(loss, kF32);
  return wide * scale_;
}

void GradScaler::unscale_(optim::Optimizer& opt) {
  if (!opt_.enabled) return;
  PerOptimizer& st = per_opt_[&opt];
  MDL_CHECK(st.stage != Stage::Unscaled,
            "GradScaler.unscale_: already called on this optimizer since the last update()");
  MDL_CHECK(st.stage != Stage::Stepped, "GradScaler.unscale_: called after step() (call it before step())");
  NoGradGuard no_grad;
  // Every gradient is checked before any is touched: a refused one leaves all of them scaled.
  std::vector<Tensor> params;
  for (const auto& group : opt.param_groups())
    for (const auto& p : group.params) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      MDL_CHECK(g.dtype() == kF32 || g.dtype() == kF64, "GradScaler.unscale_: the gradient of a parameter of shape ",
                p.shape(), " is ", g.dtype(), "; unscaling needs f32 master weights and gradients (keep the ",
                "parameters f32 and use AutocastGuard, or train in pure 16-bit without a scaler)");
      params.push_back(p);
    }
  const double inv_scale = 1.0 / scale_;
  std::vector<std::pair<Device, Tensor>> found;  // one flag per device
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.is_contiguous()) {
      g = g.contiguous();
      p.set_grad(g);
    }
    Tensor* flag = nullptr;
    for (auto& [d, f] : found)
      if (d == g.device()) flag = &f;
    if (!flag) flag = &found.emplace_back(g.device(), zeros({}, TensorOptions(kF32, g.device()))).second;
    kernels::unscale_check(g.device(), g, *flag, inv_scale);
  }
  st.found_inf = false;
  for (auto& [d, f] : found) st.found_inf = st.found_inf || f.item<float>() != 0.0f;
  if (reduce_found_inf_) st.found_inf = reduce_found_inf_(st.found_inf);
  st.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!opt_.enabled) {
    opt.step();
    return true;
  }
  PerOptimizer& st = per_opt_[&opt];
  MDL_CHECK(st.stage != Stage::Stepped, "GradScaler.step: already called on this optimizer since the last update()");
  if (st.stage == Stage::Ready) unscale_(opt);
  const bool stepped = !st.found_inf;
  if (stepped) opt.step();
  else ++skipped_;
  st.stage = Stage::Stepped;
  return stepped;
}

void GradScaler::update() {
  if (!opt_.enabled) return;
  bool checked = false, found_inf = false;
  for (const auto& [o, st] : per_opt_) {
    if (st.stage == Stage::Ready) continue;
    checked = true;
    found_inf = found_inf || st.found_inf;
  }
  MDL_CHECK(checked, "GradScaler.update: no inf checks were recorded since the last update() (call step() first)");
  if (found_inf) {
    // PyTorch keeps halving, down to 0, and then steps on zero gradients without a word.
    const double backed_off = scale_ * opt_.backoff_factor;
    MDL_CHECK(backed_off >= kMinScale, "GradScaler.update: the scale would fall from ", scale_, " to ", backed_off,
              ", below f32's smallest normal number ", kMinScale,
              ", where the scaled loss rounds to 0: ", "the gradients keep overflowing (", skipped_,
              " steps skipped in all), so the loss or the model has ", "diverged");
    scale_ = backed_off;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == opt_.growth_interval) {
    const double grown = scale_ * opt_.growth_factor;
    if (grown <= kMaxScale) scale_ = grown;
    growth_tracker_ = 0;
  }
  per_opt_.clear();
}

void GradScaler::update(double new_scale) {
  if (!opt_.enabled) return;
  MDL_CHECK(scale_valid(new_scale), "GradScaler.update: new_scale must be positive and finite, in f32's normal range [",
            kMinScale, ", ", kMaxScale, "], got ", new_scale);
  scale_ = new_scale;
  growth_tracker_ = 0;
  per_opt_.clear();
}

NamedTensors GradScaler::state_dict() const {
  if (!opt_.enabled) return {};
  return {{"scale", scalar_tensor(scale_, kF64)},
          {"growth_factor", scalar_tensor(opt_.growth_factor, kF64)},
          {"backoff_factor", scalar_tensor(opt_.backoff_factor, kF64)},
          {"growth_interval", scalar_tensor(double(opt_.growth_interval), kI64)},
          {"_growth_tracker", scalar_tensor(double(growth_tracker_), kI64)},
          {"skipped_steps", scalar_tensor(double(skipped_), kI64)}};
}

void GradScaler::load_state_dict(const NamedTensors& state) {
  MDL_CHECK(opt_.enabled, "GradScaler.load_state_dict: this scaler is disabled");
  MDL_CHECK(!state.empty(), "GradScaler.load_state_dict: the state dict is empty (saved from a disabled scaler?)");
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : state)
      if (n == name) return &t;
    return nullptr;
  };
  auto get = [&](const std::string& name) -> const Tensor& {
    const Tensor* t = find(name);
    MDL_CHECK(t, "GradScaler.load_state_dict: missing '", name, "'");
    return *t;
  };
  auto what = [](const std::string& name) { return "GradScaler.load_state_dict: '" + name + "'"; };
  // Everything is read and checked first; the scaler changes only once all of it passed.
  GradScalerOptions o = opt_;
  o.init_scale = optim::finite_value(get("scale"), what("scale"));
  o.growth_factor = optim::finite_value(get("growth_factor"), what("growth_factor"));
  o.backoff_factor = optim::finite_value(get("backoff_factor"), what("backoff_factor"));
  o.growth_interval = optim::count_value(get("growth_interval"), what("growth_interval"), 1);
  const int64_t tracker = optim::count_value(get("_growth_tracker"), what("_growth_tracker"), 0, o.growth_interval - 1);
  const Tensor* skipped_entry = find("skipped_steps");
  const int64_t skipped = skipped_entry ? optim::count_value(*skipped_entry, what("skipped_steps")) : 0;
  GradScaler loaded(o);  // validates the options
  loaded.reduce_found_inf_ = std::move(reduce_found_inf_);
  loaded.growth_tracker_ = tracker;
  loaded.skipped_ = skipped;
  *this = std::move(loaded);
}

}  // namespace mdl::amp
