// The fused_layer_norm switch (switches/switches.h) of nn::functional::layer_norm
// (nn/functional_norm.cpp), for benchmarks and cross-checks.
#pragma once

namespace mdl::nn::functional {

// Whether layer_norm runs its fused kernels (kernels/norm.h: statistics and output in two passes, one
// fused backward; default true); false composes it of ops (mean, sub, mul, mean, rsqrt, mul, add),
// each a pass with a temporary, differentiated op by op.
void set_fused_layer_norm(bool on);
bool fused_layer_norm();

}  // namespace mdl::nn::functional
