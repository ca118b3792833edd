// mdl: a minimal deep learning framework. This umbrella header is the whole public API.
#pragma once

#include "autograd/grad_mode.h"  // NoGradGuard
#include "autograd/gradcheck.h"  // autograd::gradcheck

#include "io/safetensors.h"     // io::save_safetensors, io::load_safetensors, io::read_safetensors

#include "optim/accumulate.h"      // optim::accumulate_step (gradient accumulation)
#include "optim/adam.h"            // optim::Adam, optim::AdamW
#include "optim/clip.h"            // optim::clip_grad_norm_, optim::clip_grad_value_
#include "optim/optimizer.h"       // optim::Optimizer, ParamGroup, param_groups_no_decay
#include "optim/regularization.h"  // optim::l2_penalty
#include "optim/schedulers.h"      // optim::StepLR, CosineAnnealingLR, ..., ReduceLROnPlateau
#include "optim/sgd.h"             // optim::SGD

#include "tensor/allocator.h"   // memory_stats, reset_peak_memory
#include "tensor/device.h"      // Device, cuda::is_available
#include "tensor/dtype.h"       // DType, kF32, kF16, kBF16, ...
#include "tensor/error.h"       // mdl::Error
#include "tensor/factory.h"     // zeros, ones, arange, rand, randn, from_vector, manual_seed
#include "tensor/half.h"        // Half, BFloat16
#include "tensor/ops.h"         // add, matmul, softmax, sum, cat, ... and operators
#include "tensor/parallel.h"    // set_num_threads
#include "tensor/tensor.h"      // Tensor
