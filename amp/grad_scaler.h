// GradScaler: dynamic loss scaling for f16 mixed precision, as torch.amp.GradScaler. f16
// gradients below 3e-8 round to zero (and below 6e-5 lose bits as subnormals); multiplying the
// loss by a large scale lifts them into f16's range, and the f32 master gradients are divided
// by it again before the step.
//
// The order of calls, each training step:
//   opt.zero_grad();
//   { amp::AutocastGuard autocast(kF16); loss = criterion(model->forward(x), y); }
//   scaler.scale(loss).backward();       // gradients are now `scale` times too large
//   scaler.unscale_(opt);                // only when something must see true gradients:
//   optim::clip_grad_norm_(params, 1.0); //   clipping scaled gradients clips the wrong norm
//   scaler.step(opt);                    // unscales (unless done), skips on inf/NaN
//   scaler.update();                     // halves the scale after a skip, doubles it after
//                                        // growth_interval clean steps
// With gradient accumulation over k micro-batches, each micro-batch's loss is divided by k
// before scale(loss).backward(), and unscale_/step/update run once per k micro-batches.
//
// A skipped step leaves every parameter and the optimizer's state untouched; step() returns
// whether it stepped, so an LR schedule can advance only on real updates. Unscaling refuses
// f16/bf16 gradients: the parameters behind them should be f32 master weights (pure 16-bit
// training runs without a scaler). A disabled scaler passes everything through.
#pragma once
#include <cstdint>
#include <functional>
#include <unordered_map>

#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace mdl::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale, computed in f32 (f64 stays f64); loss itself when disabled.
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient of opt by the scale in place, noting whether any was inf or NaN
  // (one fused pass per gradient). At most once per optimizer between update()s.
  void unscale_(optim::Optimizer& opt);
  // unscale_ (unless done), then opt.step() unless a gradient was inf or NaN. Returns whether
  // the optimizer stepped. At most once per optimizer between update()s.
  bool step(optim::Optimizer& opt);
  // Backs off after a step with inf/NaN, grows after growth_interval clean steps; then readies
  // every optimizer for the next iteration. Needs at least one step() since the last update().
  void update();
  // Sets the scale (new_scale > 0 and finite) and readies the optimizers, as update(new_scale).
  void update(double new_scale);

  // Combines this process's inf/NaN verdict with the other processes' before step() decides
  // (dist::sync_found_inf installs an all_reduce); without one the local verdict stands.
  void set_found_inf_reduction(std::function<bool(bool found_inf)> reduce) { reduce_found_inf_ = std::move(reduce); }

  double get_scale() const;  // 1 when disabled
  bool is_enabled() const { return opt_.enabled; }
  int64_t skipped_steps() const { return skipped_; }
  int64_t growth_tracker() const { return growth_tracker_; }  // clean steps since the last change

  // "scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker" (as
  // PyTorch's), and "skipped_steps"; empty when disabled.
  NamedTensors state_dict() const;
  void load_state_dict(const NamedTensors& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };

  GradScalerOptions opt_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_opt_;
  std::function<bool(bool)> reduce_found_inf_;
};

}  // namespace mdl::amp
