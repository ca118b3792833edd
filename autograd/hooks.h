// Post-accumulate-grad hooks: a callback per leaf tensor that runs once per backward, right after
// the leaf's .grad() is final for that backward (every path into the leaf has been summed in), as
// PyTorch's Tensor.register_post_accumulate_grad_hook. DistributedDataParallel uses it to start a
// bucket's all-reduce while the rest of backward still runs.
#pragma once
#include <cstdint>
#include <functional>

#include "tensor/tensor.h"

namespace mdl::autograd {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

// Registers `hook` on a leaf that requires grad; returns a handle for removal. Hooks on one leaf
// run in registration order. The hook must not run backward itself.
uint64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
// Removes a hook; an unknown or already removed handle is ignored.
void remove_post_accumulate_grad_hook(uint64_t handle);

namespace detail {
bool has_post_accumulate_grad_hooks();  // any registered at all (the engine's fast path)
bool has_post_accumulate_grad_hook(const TensorImpl* leaf);
void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf);
}  // namespace detail

}  // namespace mdl::autograd
