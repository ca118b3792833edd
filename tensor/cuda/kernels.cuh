// The CUDA backend's implementations of the kernel contracts (tensor/kernels*.h), one per
// primitive; register.cu puts them into the stubs' CUDA slots.
#pragma once
#include "tensor/kernels.h"
#include "tensor/kernels_amp.h"
#include "tensor/kernels_attention.h"
#include "tensor/kernels_conv.h"
#include "tensor/kernels_norm.h"
#include "tensor/kernels_optim.h"

namespace mdl::cuda {

kernels::FillFn fill;
kernels::CopyFn copy;
kernels::UnaryFn unary;
kernels::BinaryFn binary;
kernels::WhereFn where;
kernels::ReduceFn reduce;
kernels::ArgReduceFn arg_reduce;
kernels::VarFn var;
kernels::SoftmaxFn softmax;
kernels::SoftmaxBackwardFn softmax_backward;
kernels::BmmFn bmm;
kernels::IndexSelectFn index_select;
kernels::GatherFn gather;
kernels::ScatterAddFn scatter_add;
kernels::IndexAddFn index_add;
kernels::TriFn tri;

kernels::DropoutMaskFn dropout_mask;
kernels::MaskedScaleFn masked_scale;
kernels::GroupNormForwardFn group_norm_forward;
kernels::GroupNormBackwardFn group_norm_backward;
kernels::BatchNormForwardFn batch_norm_forward;
kernels::BatchNormBackwardFn batch_norm_backward;
kernels::CrossEntropyForwardFn cross_entropy_forward;
kernels::CrossEntropyBackwardFn cross_entropy_backward;

kernels::AdamStepFn adam_step;
kernels::SGDStepFn sgd_step;
kernels::SumSquaresFn sum_squares;

kernels::Conv2dForwardFn conv2d_forward;
kernels::Conv2dBackwardFn conv2d_backward;
kernels::MaxPool2dForwardFn max_pool2d_forward;
kernels::MaxPool2dBackwardFn max_pool2d_backward;
kernels::AvgPool2dForwardFn avg_pool2d_forward;
kernels::AvgPool2dBackwardFn avg_pool2d_backward;
kernels::AdaptiveAvgPool2dForwardFn adaptive_avg_pool2d_forward;
kernels::AdaptiveAvgPool2dBackwardFn adaptive_avg_pool2d_backward;

kernels::UnscaleCheckFn unscale_check;
kernels::AttentionForwardFn attention_forward;
kernels::AttentionBackwardFn attention_backward;

}  // namespace mdl::cuda
