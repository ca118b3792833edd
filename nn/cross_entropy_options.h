// The fused_cross_entropy switch (switches/switches.h) of nn::functional::cross_entropy
// (nn/functional_loss.cpp), for benchmarks and cross-checks.
#pragma once

namespace mdl::nn::functional {

// Whether cross_entropy runs as one fused node (log-softmax, NLL and label smoothing in one kernel
// each way; default true); false composes it of ops: log_softmax, then nll_loss (and the mean of
// -log_probs over the classes for label smoothing), differentiated op by op.
void set_fused_cross_entropy(bool on);
bool fused_cross_entropy();

}  // namespace mdl::nn::functional
