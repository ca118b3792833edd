// mdl: a minimal deep learning framework. This umbrella header is the whole public API.
#pragma once

#include "tensor/grad_mode.h"  // NoGradGuard
#include "ops/gradcheck.h"     // autograd::gradcheck
#include "autograd/hooks.h"    // autograd::register_post_accumulate_grad_hook

#include "ops/autocast.h"          // amp::AutocastGuard (kF16, kBF16), is_autocast_enabled
#include "amp/grad_scaler.h"       // amp::GradScaler
#include "amp/keep_f32.h"          // hybrid precision: modules kept in f32 under autocast
#include "amp/precision_report.h"  // amp::precision_report: autocast's error against f32

#include "data/cifar.h"           // data::Cifar10Binary, Cifar100Binary
#include "data/class_subset.h"    // data::ClassSubset (some classes, relabelled)
#include "data/export.h"          // data::export_image_folder
#include "data/idx.h"             // data::IdxDataset, data::FashionMNIST
#include "data/image_folder.h"    // data::ImageFolder
#include "data/loader.h"          // data::DataLoader, LoaderOptions, Cache, LoaderStats
#include "data/pinned.h"          // data::pinned_memory_available, data::empty_pinned
#include "data/sampler.h"         // data::Sampler, DistributedSampler
#include "data/subset.h"          // data::Subset (the first n samples)
#include "data/tensor_dataset.h"  // data::TensorDataset
#include "data/text.h"            // data::TextDataset
#include "data/transforms.h"      // data::ToTensor, Normalize, RandomCrop, RandomHorizontalFlip, Resize, ...

#include "io/safetensors.h"  // io::save_safetensors, io::load_safetensors, io::read_safetensors

#include "nn/container.h"      // nn::Sequential, nn::ModuleList
#include "nn/functional.h"     // nn::functional: linear, conv2d, norms, attention, losses
#include "nn/init.h"           // nn::init
#include "nn/layers.h"         // nn::Linear, Conv2d, BatchNorm2d, LayerNorm, Dropout, ...
#include "nn/linear_act.h"     // nn::LinearAct, nn::functional::linear(x, w, b, Activation)
#include "nn/models/models.h"  // nn::models: MLP, SimpleCNN, resnet18/50, efficientnet_b0, efficientnet_v2_b0, ViT, GPT
#include "nn/module.h"         // nn::Module
#include "nn/separable_conv.h"  // nn::SeparableConv2d (depthwise + pointwise)
#include "nn/summary.h"         // nn::summary
#include "nn/transformer.h"     // nn::MultiheadAttention, TransformerEncoderLayer, PatchEmbedding

#include "optim/accumulate.h"      // optim::accumulate_step (gradient accumulation)
#include "optim/adam.h"            // optim::Adam, optim::AdamW
#include "optim/clip.h"            // optim::clip_grad_norm_, optim::clip_grad_value_
#include "optim/optimizer.h"       // optim::Optimizer, ParamGroup, param_groups_no_decay
#include "optim/regularization.h"  // optim::l2_penalty
#include "optim/schedulers.h"      // optim::StepLR, CosineAnnealingLR, ..., ReduceLROnPlateau
#include "optim/sgd.h"             // optim::SGD

#include "profiler/session.h"     // profiler::Session, Scope, Phase; table(), export_chrome_trace()
#include "profiler/cuda_timer.h"  // profiler::cuda_device_timer

#include "tensor/allocator.h"    // memory_stats, reset_peak_memory
#include "cuda/api.h"            // cuda:: allocator statistics, empty_cache, Graph, CopyStream
#include "tensor/device.h"       // Device, cuda::is_available
#include "tensor/dtype.h"        // DType, kF32, kF16, kBF16, ...
#include "tensor/error.h"        // mdl::Error
#include "ops/native/factory.h"  // zeros, ones, arange, rand, randn, from_vector, manual_seed
#include "tensor/half.h"         // Half, BFloat16
#include "ops/ops.h"             // add, matmul, softmax, sum, cat, ... and operators
#include "tensor/parallel.h"     // set_num_threads
#include "tensor/tensor.h"       // Tensor

#include "amp/amp_config.h"  // amp::AmpConfig: a run's mixed precision
#include "train/builtin_callbacks.h"  // train::ProgressPrinter, CsvLogger, SaveCheckpoint, CheckpointBest, EarlyStopping, ReduceLROnPlateau, TimeToTarget
#include "train/checkpoint.h"     // train::save_checkpoint, resume_checkpoint
#include "train/profile_steps.h"  // train::ProfileSteps
#include "train/trainer.h"        // train::Trainer (fit, evaluate), TrainerConfig, Callback

// Data parallel: built with Open MPI (make MPI=auto|0|1), NCCL (with CUDA, make NCCL=auto|0|1) or both.
#ifdef MDL_WITH_DIST
#include "dist/ddp.h"  // dist::DistributedDataParallel, sync_found_inf
#endif
#ifdef MDL_WITH_MPI
#include "dist/mpi_group.h"  // dist::MpiProcessGroup
#endif
#ifdef MDL_WITH_NCCL
#include "dist/nccl_group.h"  // dist::NcclProcessGroup
#endif
