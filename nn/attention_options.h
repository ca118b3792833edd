// The fused_attention switch (switches/switches.h) of nn::functional::scaled_dot_product_attention
// (nn/functional_attention.cpp), for benchmarks and cross-checks.
#pragma once

namespace mdl::nn::functional {

// Whether scaled_dot_product_attention runs its fused kernels (kernels/attention.h: scores, softmax
// and P v per block of query rows, the backward recomputing the probabilities; default true); false
// composes it of ops (matmul, masked_fill, softmax, masked_fill, matmul), each a pass over an
// (.., L, S) temporary that autograd keeps for the backward.
void set_fused_attention(bool on);
bool fused_attention();

}  // namespace mdl::nn::functional
