// GradScaler: scale, the fused unscale-and-check per gradient, the step skipped on the device,
// the scale update, and its state dict.
#include "amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/error.h"
#include "ops/native/factory.h"
#include "kernels/amp.h"
#include "ops/ops.h"
#include "optim/state_values.h"
#include "switches/list/toggles.h"

namespace mdl::amp {
namespace {

// The loss is multiplied by the scale in f32 and the gradients by its inverse: both are f32 numbers
// only while the scale stays in f32's normal range. Below it the scaled loss rounds to 0 and every
// step would see zero (or NaN) gradients.
constexpr double kMinScale = std::numeric_limits<float>::min();  // 2^-126
constexpr double kMaxScale = std::numeric_limits<float>::max();
bool scale_valid(double s) { return s >= kMinScale && s <= kMaxScale; }

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : opt_(options) {
  MDL_CHECK(scale_valid(opt_.init_scale), "GradScaler: init_scale must be positive and finite, in f32's normal range [",
            kMinScale, ", ", kMaxScale, "], got ", opt_.init_scale);
  MDL_CHECK(opt_.growth_factor > 1.0 && std::isfinite(opt_.growth_factor),
            "GradScaler: growth_factor must be finite and greater than 1, got ", opt_.growth_factor);
  MDL_CHECK(opt_.backoff_factor > 0.0 && opt_.backoff_factor < 1.0,
            "GradScaler: backoff_factor must be in (0, 1), got ", opt_.backoff_factor);
  MDL_CHECK(opt_.growth_interval >= 1, "GradScaler: growth_interval must be at least 1, got ", opt_.growth_interval);
  scale_ = scalar_tensor(opt_.init_scale, kF32);
  growth_tracker_ = zeros({}, kI64);
  skipped_ = zeros({}, kI64);
}

StepResult::operator bool() const { return !found_inf_.defined() || found_inf_.item<float>() == 0.0f; }

double GradScaler::get_scale() const { return opt_.enabled ? double(scale_.item<float>()) : 1.0; }
int64_t GradScaler::skipped_steps() const { return skipped_.item<int64_t>(); }
int64_t GradScaler::growth_tracker() const { return growth_tracker_.item<int64_t>(); }

void GradScaler::move_state_to(Device d) {
  if (scale_.device() == d) return;
  scale_ = scale_.to(d);
  growth_tracker_ = growth_tracker_.to(d);
  skipped_ = skipped_.to(d);
}

Tensor GradScaler::scale(const Tensor& loss) {
  MDL_CHECK(loss.defined(), "GradScaler.scale: the loss is undefined");
  MDL_CHECK(loss.is_floating_point(), "GradScaler.scale: expected a floating loss, got ", loss.dtype());
  if (!opt_.enabled) return loss;
  if (per_opt_.empty()) move_state_to(loss.device());
  MDL_CHECK(loss.device() == scale_.device(), "GradScaler.scale: the loss is on ", loss.device(),
            " but this step's scale is on ", scale_.device());
  // In f32, as PyTorch multiplies by its f32 scale tensor: an f16 loss times 65536 would overflow.
  if (loss.dtype() == kF64) return loss * scale_.to(kF64);
  return to_dtype(loss, kF32) * scale_;
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
  MDL_CHECK(!params.empty(), "GradScaler.unscale_: no parameter of this optimizer has a gradient, so there is nothing ",
            "to check for inf (was backward() run on the scaled loss?)");
  // One flag and one copy of the scale per device the gradients are on.
  struct OnDevice {
    Device device;
    Tensor found_inf, scale;
    std::vector<Tensor> grads;  // for the multi-tensor kernel
  };
  std::vector<OnDevice> per_device;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.is_contiguous() && !g.is_contiguous(MemoryFormat::ChannelsLast)) {  // dense: a flat walk
      g = g.contiguous();
      p.set_grad(g);
    }
    auto it = std::find_if(per_device.begin(), per_device.end(),
                           [&](const OnDevice& o) { return o.device == g.device(); });
    if (it == per_device.end()) {
      per_device.push_back({g.device(), zeros({}, TensorOptions(kF32, g.device())), scale_.to(g.device()), {}});
      it = per_device.end() - 1;
    }
    if (toggles::multi_tensor_step()) it->grads.push_back(g);
    else kernels::unscale_check(g.device(), g, it->found_inf, it->scale);
  }
  for (const OnDevice& d : per_device)  // one call per device: a few launches for every gradient
    if (!d.grads.empty()) kernels::unscale_check_many(d.device, d.grads, d.found_inf, d.scale);
  // The flags combined on the scale's device (Max: any inf anywhere); usually there is one.
  Tensor found = per_device.empty() ? zeros({}, TensorOptions(kF32, scale_.device()))
                                    : per_device[0].found_inf.to(scale_.device());
  for (size_t i = 1; i < per_device.size(); ++i) found = maximum(found, per_device[i].found_inf.to(scale_.device()));
  if (reduce_found_inf_) reduce_found_inf_(found);
  st.found_inf = found;
  st.stage = Stage::Unscaled;
}

StepResult GradScaler::step(optim::Optimizer& opt) {
  if (!opt_.enabled) {
    opt.step();
    return StepResult();
  }
  PerOptimizer& st = per_opt_[&opt];
  MDL_CHECK(st.stage != Stage::Stepped, "GradScaler.step: already called on this optimizer since the last update()");
  if (st.stage == Stage::Ready) unscale_(opt);
  opt.step_if_finite(st.found_inf);
  st.stage = Stage::Stepped;
  return StepResult(st.found_inf);
}

// Any inf or NaN in the gradients of the optimizers checked since the last update(); undefined when none was.
Tensor GradScaler::found_inf_since_update() const {
  Tensor found_inf;
  for (const auto& [o, st] : per_opt_) {
    if (st.stage == Stage::Ready) continue;
    found_inf = found_inf.defined() ? maximum(found_inf, st.found_inf) : st.found_inf;
  }
  return found_inf;
}

void GradScaler::update() {
  if (!opt_.enabled) return;
  const Tensor found_inf = found_inf_since_update();
  MDL_CHECK(found_inf.defined(),
            "GradScaler.update: no inf checks were recorded since the last update() (call step() first)");
  // PyTorch keeps halving, down to 0, and then steps on zero gradients without a word; this
  // kernel refuses to go below f32's smallest normal number.
  const kernels::ScaleUpdate rule{.growth_factor = opt_.growth_factor,
                                  .backoff_factor = opt_.backoff_factor,
                                  .growth_interval = opt_.growth_interval};
  kernels::update_scale(scale_.device(), scale_, growth_tracker_, skipped_, found_inf, rule);
  per_opt_.clear();
}

void GradScaler::update(double new_scale) {
  if (!opt_.enabled) return;
  MDL_CHECK(scale_valid(new_scale), "GradScaler.update: new_scale must be positive and finite, in f32's normal range [",
            kMinScale, ", ", kMaxScale, "], got ", new_scale);
  scale_.fill_(new_scale);  // the growth tracker goes on counting, as PyTorch's
  // A step skipped for an inf counts as skipped whichever update() follows it.
  if (const Tensor found_inf = found_inf_since_update(); found_inf.defined())
    skipped_.add_(ne(found_inf, zeros_like(found_inf)).to(skipped_.dtype()));
  per_opt_.clear();
}

NamedTensors GradScaler::state_dict() const {
  if (!opt_.enabled) return {};
  return {{"scale", scalar_tensor(get_scale(), kF64)},
          {"growth_factor", scalar_tensor(opt_.growth_factor, kF64)},
          {"backoff_factor", scalar_tensor(opt_.backoff_factor, kF64)},
          {"growth_interval", scalar_tensor(double(opt_.growth_interval), kI64)},
          {"_growth_tracker", scalar_tensor(double(growth_tracker()), kI64)},
          {"skipped_steps", scalar_tensor(double(skipped_steps()), kI64)}};
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
  loaded.growth_tracker_.fill_(double(tracker));
  loaded.skipped_.fill_(double(skipped));
  loaded.move_state_to(scale_.device());
  loaded.per_opt_ = std::move(per_opt_);  // a step in progress keeps its stage: unscaled gradients stay unscaled
  *this = std::move(loaded);
}

}  // namespace mdl::amp
