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
//
// The scale, the inf flag, the growth tracker and the skip count are 0-dim tensors on the loss's
// device (moved there by the first scale()), and every decision is taken there: the unscale
// kernel raises the flag, the optimizer's kernels skip on it, a one-thread kernel updates the
// scale. Nothing waits for the GPU until the host asks (get_scale(), a StepResult read as bool),
// so the AMP step can be captured whole as a CUDA Graph, as PyTorch's GradScaler allows.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
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

// What step() did, known on the device: reading it as a bool waits for the device.
class StepResult {
 public:
  explicit StepResult(Tensor found_inf = {}) : found_inf_(std::move(found_inf)) {}
  operator bool() const;                                  // whether the optimizer stepped
  const Tensor& found_inf() const { return found_inf_; }  // 0-dim f32; undefined when disabled

 private:
  Tensor found_inf_;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale, computed in f32 (f64 stays f64); loss itself when disabled.
  Tensor scale(const Tensor& loss);
  // Divides every gradient of opt by the scale in place, noting whether any was inf or NaN
  // (one fused pass per gradient). At most once per optimizer between update()s; refused when no
  // parameter of opt has a gradient (a backward forgotten would otherwise count as a clean step).
  void unscale_(optim::Optimizer& opt);
  // unscale_ (unless done), then opt.step_if_finite(): every update is skipped on the device when
  // a gradient was inf or NaN. At most once per optimizer between update()s.
  StepResult step(optim::Optimizer& opt);
  // Backs off after a step with inf/NaN, grows after growth_interval clean steps; then readies
  // every optimizer for the next iteration. Needs at least one step() since the last update().
  void update();
  // Sets the scale (new_scale > 0 and finite) and readies the optimizers, as update(new_scale); a
  // step skipped since the last update() still counts in skipped_steps().
  void update(double new_scale);

  // Combines, in place, this process's inf/NaN flag (0-dim f32 on the scale's device) with the
  // other processes' before step() decides (dist::sync_found_inf installs an all_reduce with
  // Max); without one the local flag stands.
  void set_found_inf_reduction(std::function<void(const Tensor& found_inf)> reduce) {
    reduce_found_inf_ = std::move(reduce);
  }

  // Read on the host: each waits for the device.
  double get_scale() const;  // 1 when disabled
  int64_t skipped_steps() const;
  int64_t growth_tracker() const;  // clean steps since the last change
  bool is_enabled() const { return opt_.enabled; }
  // The scale as it lives on the device (0-dim f32); what scale() multiplies by.
  const Tensor& scale_tensor() const { return scale_; }

  // "scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker" (as
  // PyTorch's), and "skipped_steps"; empty when disabled.
  NamedTensors state_dict() const;
  // Loads the scale and counters; an optimizer already unscaled or stepped since the last update()
  // stays so (its gradients are not unscaled again).
  void load_state_dict(const NamedTensors& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    Tensor found_inf;  // 0-dim f32 on the scale's device
  };

  // Moves the scaler's state to device d (once, at the first scale() of a loss there).
  void move_state_to(Device d);
  Tensor found_inf_since_update() const;

  GradScalerOptions opt_;
  Tensor scale_;           // 0-dim f32
  Tensor growth_tracker_;  // 0-dim i64
  Tensor skipped_;         // 0-dim i64
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_opt_;
  std::function<void(const Tensor&)> reduce_found_inf_;
};

}  // namespace mdl::amp
