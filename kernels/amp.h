// The kernel contract for mixed precision: GradScaler's fused pass that unscales a gradient in
// place and notes whether any of its elements is inf or NaN, reading and writing memory once
// (PyTorch's _amp_foreach_non_finite_check_and_unscale_), and the scale's update after a step
// (PyTorch's _amp_update_scale_). The scale, the flag and the counters are 0-dim tensors on the
// gradients' device and every kernel reads them there, so a GPU step needs no host sync and a
// CUDA Graph replays the scaler with the values of the moment.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/core.h"

namespace mdl::kernels {

// grad (n) contiguous f32 or f64; found_inf and scale 0-dim f32 on grad's device:
// grad *= 1 / scale; found_inf is set to 1 when any element of grad was inf or NaN before
// scaling, and left alone otherwise.
using UnscaleCheckFn = void(const Tensor& grad, const Tensor& found_inf, const Tensor& scale);
// The same for many gradients on one device (f32 and f64 may mix; each dense): a GPU unscales up
// to 24 gradients of a dtype per launch instead of one each.
using UnscaleCheckManyFn = void(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& scale);

struct ScaleUpdate {
  double growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};
// scale 0-dim f32; growth_tracker, skipped 0-dim i64; found_inf 0-dim f32; one device. After a
// step with found_inf != 0: scale *= backoff_factor, growth_tracker = 0, skipped += 1; after a
// clean one: growth_tracker += 1, and on reaching growth_interval scale *= growth_factor (kept
// when that would pass f32's largest finite number) and growth_tracker = 0. A backed-off scale
// below f32's smallest normal number is an error (the loss has diverged): the CPU throws, the
// GPU leaves the scale as it was and records it for the next synchronisation point.
using UpdateScaleFn = void(const Tensor& scale, const Tensor& growth_tracker, const Tensor& skipped,
                           const Tensor& found_inf, const ScaleUpdate& u);

#define MDL_AMP_KERNELS(X)                                                  \
  X(unscale_check, UnscaleCheckFn, "amp_unscale_check", BOTH)               \
  X(unscale_check_many, UnscaleCheckManyFn, "amp_unscale_check_many", BOTH) \
  X(update_scale, UpdateScaleFn, "amp_update_scale", BOTH)
MDL_AMP_KERNELS(MDL_DEFINE_STUB)

// The error update_scale raises when the scale would underflow, shared by both devices.
[[noreturn]] inline void fail_scale_underflow(double scale, double backed_off, int64_t skipped,
                                              const char* suffix = "") {
  MDL_FAIL("GradScaler.update: the scale would fall from ", scale, " to ", backed_off,
           ", below f32's smallest normal number ", double(std::numeric_limits<float>::min()),
           ", where the scaled loss rounds to 0: the gradients keep overflowing (", skipped,
           " steps skipped in all), so the loss or the model has diverged", suffix);
}

}  // namespace mdl::kernels
