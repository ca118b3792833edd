// The kernel contract's basic primitives (fill, copy, elementwise, reductions, softmax, batched
// matmul, indexing), which every backend implements. Each is a Stub (kernels/stub.h); ops
// (ops/native/native.h) check arguments, allocate outputs and call the stub for the tensors' device.
// Kernels receive outputs already allocated with the right shape and dtype; inputs may have any
// strides (including 0 for broadcast dims) unless the primitive says otherwise.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/op_kinds.h"
#include "kernels/stub.h"

namespace mdl {

// The most dims a kernel takes: shapes and strides travel in fixed arrays (on CUDA as kernel
// arguments, where smaller is cheaper). Ops on more dims fail with an mdl::Error naming the op.
inline constexpr int kMaxDimsCpu = 16;
inline constexpr int kMaxDimsCuda = 8;

namespace kernels {

// out[...] = value.
using FillFn = void(const Tensor& out, double value);
// dst[...] = cast(src[...]); same shape, any strides and dtypes, same device.
using CopyFn = void(const Tensor& dst, const Tensor& src);
// out = op(in); out contiguous; same dtype (floating unless op is Neg/Abs/Square/Sign/Relu).
using UnaryFn = void(UnaryOp op, const Tensor& out, const Tensor& in);
// out = op(a, b); a and b expanded to out's shape, both of the compute dtype (or of the two dtypes
// binary_takes_mixed names for out's device); out has the compute dtype, or Bool for comparisons.
// Integer division by zero and integers to negative integer powers are an mdl::Error naming div /
// pow: thrown by the CPU kernel, recorded by the GPU kernel and thrown at the next sync point.
using BinaryFn = void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
// out = op(x, s), or op(s, x) when scalar_left: s a 0-d CPU tensor, x of out's shape on out's
// device, both of the compute dtype; out and the errors as binary's. The kernel reads s on the host
// and takes its value as an argument (on CUDA one launch over x, with no tensor of s on the device).
// Profiles and errors name it binary.
using BinaryScalarFn = void(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& s, bool scalar_left);

// The ops binary_takes_mixed allows: arithmetic whose result has the compute dtype.
constexpr bool binary_op_takes_mixed(BinaryOp op) {
  using enum BinaryOp;
  return op == Add || op == Sub || op == Mul || op == Div || op == Maximum || op == Minimum || op == AddRelu;
}
// Whether device d's binary kernel takes operands of dtypes a and b as they are for an op computing
// in `compute`, widening each element itself, so that native::binary makes no cast copy of the
// narrower one. Widening f16 or bf16 to f32 is exact, so the result equals the cast path's bit for
// bit. True on CUDA for f32 with f16 or bf16 in either order (an f32 residual plus a 16-bit branch
// under autocast) in the ops above; the CPU kernel takes one dtype.
inline bool binary_takes_mixed(Device d, BinaryOp op, DType compute, DType a, DType b) {
  auto half = [](DType t) { return t == kF16 || t == kBF16; };
  return d.is_cuda() && binary_op_takes_mixed(op) && compute == kF32 &&
         ((a == kF32 && half(b)) || (half(a) && b == kF32));
}
// out = cond ? a : b; all expanded to out's shape; cond Bool; a, b of out's dtype.
using WhereFn = void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// out = reduce(in) over the dims where reduce_mask[d] is true; out has in's rank (keepdim form). out
// may have another dtype than kernels::reduce_natural_dtype's: converted, or written directly where
// kernels::reduce_writes_directly says so (an f16/bf16 sum or mean into f32).
using ReduceFn = void(ReduceOp op, const Tensor& out, const Tensor& in, const std::vector<bool>& reduce_mask);
// values and indices (I64) of max/min along dim; both in keepdim form.
using ArgReduceFn = void(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim);
// out = sum((in - mean)^2) / (N - correction) over the masked dims; keepdim form.
using VarFn = void(const Tensor& out, const Tensor& in, const std::vector<bool>& reduce_mask, int64_t correction);
// out = softmax(in) (or log_softmax) along dim; out contiguous.
using SoftmaxFn = void(const Tensor& out, const Tensor& in, int64_t dim, bool log);
// grad_in from grad_out and the forward output, along dim.
using SoftmaxBackwardFn = void(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log);
// out[b] = a[b] @ b[b] for 3-D a (B,M,K), b (B,K,N), out (B,M,N) contiguous; any strides in a, b.
// out has a's and b's dtype, or is f32 for f16/bf16 a and b: the f32 sums then are not rounded.
using BmmFn = void(const Tensor& out, const Tensor& a, const Tensor& b);
// out = in.index_select(dim, index); index 1-D I64 (checked in range by the op).
using IndexSelectFn = void(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
// out[i][j] = in[i][index[i][j]] (along dim); index I64, out contiguous with index's shape.
using GatherFn = void(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
// out (already holding a copy of self) += src scattered along dim at index.
using ScatterAddFn = void(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// out = index_add: out.index_select(dim, index) += src, accumulating repeats (backward of index_select).
using IndexAddFn = void(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// What check_index tests: every value v of an index tensor lies in [0, size), or equals `ignore`
// when has_ignore. `op` and `what` ("index", "target") name the error and must be string
// literals: the GPU keeps the pointer until the host reads its error record. dim >= 0 reads
// "<op>: index 7 is out of range for dim 0 with size 5"; dim < 0 reads "<op>: target 7 is out of
// range for 5 classes".
struct IndexCheck {
  const char* op;
  const char* what;
  int64_t size;
  int64_t dim = -1;
  bool has_ignore = false;
  int64_t ignore = 0;
};
// The error for a value v that fails c; `suffix` ends the message.
[[noreturn]] inline void fail_index_check(const IndexCheck& c, int64_t v, const char* suffix = "") {
  if (c.dim >= 0)
    MDL_FAIL(c.op, ": ", c.what, " ", v, " is out of range for dim ", c.dim, " with size ", c.size, suffix);
  MDL_FAIL(c.op, ": ", c.what, " ", v, " is out of range for ", c.size, " classes", suffix);
}
// Checks index (I64, contiguous) against c. The CPU throws the mdl::Error at once; the GPU records
// the first bad value in its device error record (cuda/runtime/device_errors.cuh) and the error
// is thrown at the next synchronisation, so that no index is ever read on the host.
using CheckIndexFn = void(const Tensor& index, const IndexCheck& c);
// Keeps the lower (upper=false) or upper triangle of the last two dims, offset k; zeros elsewhere.
using TriFn = void(const Tensor& out, const Tensor& in, int64_t k, bool upper);

#define MDL_CORE_KERNELS(X)                                        \
  X(fill, FillFn, "fill", BOTH)                                    \
  X(copy, CopyFn, "copy", BOTH)                                    \
  X(unary, UnaryFn, "unary", BOTH)                                 \
  X(binary, BinaryFn, "binary", BOTH)                              \
  X(binary_scalar, BinaryScalarFn, "binary", BOTH)                 \
  X(where, WhereFn, "where", BOTH)                                 \
  X(reduce, ReduceFn, "reduce", BOTH)                              \
  X(arg_reduce, ArgReduceFn, "max/min", BOTH)                      \
  X(var, VarFn, "var", BOTH)                                       \
  X(softmax, SoftmaxFn, "softmax", BOTH)                           \
  X(softmax_backward, SoftmaxBackwardFn, "softmax_backward", BOTH) \
  X(bmm, BmmFn, "matmul", BOTH)                                    \
  X(index_select, IndexSelectFn, "index_select", BOTH)             \
  X(gather, GatherFn, "gather", BOTH)                              \
  X(scatter_add, ScatterAddFn, "scatter_add", BOTH)                \
  X(index_add, IndexAddFn, "index_add", BOTH)                      \
  X(check_index, CheckIndexFn, "check_index", BOTH)                \
  X(tri, TriFn, "tril/triu", BOTH)
MDL_CORE_KERNELS(MDL_DEFINE_STUB)

}  // namespace kernels
}  // namespace mdl
