// What DistributedDataParallel's constructor does across the ranks before training: checks that
// every rank built the same model, and copies rank 0's state to every rank, whatever the tensors'
// memory layout (channels-last conv weights included).
#pragma once
#include "dist/process_group.h"
#include "nn/module.h"

namespace mdl::dist {

// Agrees on the model's state dict (the number of entries, then each one's name, shape, dtype
// and requires_grad) over the group; throws the same mdl::Error on every rank, naming the first
// entry that differs and what rank 0 and a differing rank hold there. Collective.
void check_same_model(const nn::Module& module, ProcessGroup& group);

// group.broadcast for a tensor of any layout: a non-contiguous one travels as a contiguous copy
// that is copied back into it. Collective.
void broadcast_any_layout(ProcessGroup& group, const Tensor& t, int root = 0);

}  // namespace mdl::dist
