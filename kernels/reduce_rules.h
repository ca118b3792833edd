// What a reduction means, whichever backend runs it: the dtype it writes without a conversion, the
// value of a reduction over nothing, and the keepdim geometry every reduce kernel expects.
#pragma once
#include <cstddef>
#include <limits>

#include "kernels/op_kinds.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace mdl::kernels {

// Integer sums and products widen to i64; everything else keeps the input's dtype.
inline DType reduce_natural_dtype(ReduceOp op, DType in) {
  if (is_integral(in) && (op == ReduceOp::Sum || op == ReduceOp::Prod)) return kI64;
  return in;
}

// Whether a backend writes the reduction straight into out: out of the natural dtype, or an f16/bf16
// sum or mean into f32 (both accumulate in f32, so nothing is rounded on the way). Other outs take a
// reduction into the natural dtype and a copy.
inline bool reduce_writes_directly(ReduceOp op, DType in, DType out) {
  if (out == reduce_natural_dtype(op, in)) return true;
  return out == kF32 && (in == kF16 || in == kBF16) && (op == ReduceOp::Sum || op == ReduceOp::Mean);
}

// The result over an empty set: 0 for sum, 1 for prod, NaN for mean, -inf for max, +inf for min.
inline double reduce_empty_value(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return 0.0;
    case ReduceOp::Prod: return 1.0;
    case ReduceOp::Mean: return std::numeric_limits<double>::quiet_NaN();
    case ReduceOp::Max: return -std::numeric_limits<double>::infinity();
    case ReduceOp::Min: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

// out must be in's keepdim form, with one mask entry per dim.
inline void check_reduce_geometry(const char* op, const Tensor& out, const Tensor& in, size_t mask_size) {
  MDL_CHECK(out.dim() == in.dim() && mask_size == size_t(in.dim()), op, ": output ", out.shape(),
            " is not the keepdim form of input ", in.shape());
}

}  // namespace mdl::kernels
