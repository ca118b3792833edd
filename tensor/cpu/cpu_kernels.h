// The CPU backend's implementations of the kernel contract (tensor/kernels.h), one per primitive.
#pragma once
#include "tensor/kernels.h"

namespace mdl::cpu {

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

}  // namespace mdl::cpu
