// A training run's mixed precision in one value: the dtype autocast computes in (kF16, kBF16),
// or kF32 for none. f16 also needs a loss scaler (its range is narrow); bf16 has f32's range.
//
//   train::TrainerConfig config{..., .amp = {kBF16}};
//   amp::AutocastGuard guard = config.amp.guard();   // in a forward pass
#pragma once
#include <string>

#include "tensor/autocast_mode.h"
#include "tensor/dtype.h"

namespace mdl::amp {

struct AmpConfig {
  DType dtype = kF32;  // kF32: off

  bool enabled() const { return dtype != kF32; }
  bool loss_scaling() const { return dtype == kF16; }  // a GradScaler that scales and skips
  // "none", "f16" or "bf16", as mdl-train's --amp spells them.
  const char* name() const { return dtype == kF16 ? "f16" : dtype == kBF16 ? "bf16" : "none"; }
  // Autocast on in this dtype for the guard's scope, or held off when disabled.
  AutocastGuard guard() const { return AutocastGuard(enabled() ? dtype : kF16, enabled()); }
};

// "none", "f16" or "bf16"; anything else is an mdl::Error naming the choices.
AmpConfig parse_amp(const std::string& name);

}  // namespace mdl::amp
