// The fused_adamw switch (switches/switches.h) of optim::Adam and optim::AdamW (optim/adam.cpp),
// for benchmarks and cross-checks.
#pragma once

namespace mdl::optim {

// Whether Adam's and AdamW's update runs as one kernel (kernels/optim.h), one pass over each
// parameter, gradient and moment (default true); false composes the same update of tensor ops,
// several passes with temporaries.
void set_fused_adamw(bool on);
bool fused_adamw();

}  // namespace mdl::optim
