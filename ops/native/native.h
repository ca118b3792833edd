// Native ops: argument checks, output shapes and dtypes, allocation and the kernel call,
// without autograd. The public ops (ops/ops.h) wrap these and record gradients.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "kernels/core.h"
#include "tensor/tensor.h"

namespace mdl::native {

// Copies and casts.
void copy_(const Tensor& dst, const Tensor& src);  // broadcasts src to dst
Tensor to_dtype(const Tensor& x, DType t);
Tensor to_device(const Tensor& x, Device d);
Tensor contiguous(const Tensor& x);
Tensor contiguous(const Tensor& x, MemoryFormat f);  // x itself when already in f, else a copy in f
Tensor clone(const Tensor& x);                       // contiguous
Tensor clone(const Tensor& x, MemoryFormat f);       // laid out in f
// x[...] = value; an integer x takes integer_value(value, x's dtype, op).
void fill_(const Tensor& x, double value, const char* op = "fill_");

// Views.
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
// Resolves one -1 in `shape` against numel; throws naming op on mismatch.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op);

// Elementwise.
Tensor unary(UnaryOp op, const Tensor& x);
// a op b with PyTorch's promotion and broadcasting. An operand that is a scalar operand (below)
// goes to kernels::binary_scalar by value; f32 with f16/bf16 operands go uncast to a kernel that
// takes them (kernels::binary_takes_mixed); any other operand is cast to the compute dtype.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// The dtype binary and where compute a and b in: PyTorch's rule, under which a 0-dim operand does
// not widen a dimensioned one of the same category (f16 tensor + f64 0-dim stays f16).
DType result_type(const Tensor& a, const Tensor& b);
// Whether binary passes s by value: a 0-d CPU tensor beside an operand `other` that is not one.
// (Of two 0-d tensors on different devices, the op runs on the one that is not on the CPU.)
bool is_scalar_operand(const Tensor& s, const Tensor& other);
// A 0-dim tensor holding value on like's device, of like's dtype, except that beside an integral
// like a fractional or non-finite value is F32 and a whole one beside bool is I64. A whole one the
// integer dtype cannot hold wraps as PyTorch's Python ints do (-1 beside u8 is 255). For a scalar an
// op needs on the device (where, expand); a binary op takes scalar_operand.
Tensor scalar_like(double value, const Tensor& like);
// The same value and dtype as a 0-dim CPU tensor: a scalar operand of binary, which passes it to
// the kernel by value whatever like's device (no fill, no copy). For binary ops alone.
Tensor scalar_operand(double value, const Tensor& like);
// value as the other operand of a true division with like: scalar_operand's for a floating like;
// beside an integer like an f32 scalar, unwrapped (u8 / -1.0 is -x, as torch.div), since the
// division runs in f32 anyway.
Tensor division_operand(double value, const Tensor& like);
// value stored into integer dtype t as PyTorch stores a Python number: truncated toward zero and
// wrapped where the same-width signed or unsigned type holds it (-1 into u8 is 255); past that, or
// not finite, an mdl::Error naming op. Bool: value != 0. Floating t: value unchanged.
double integer_value(double value, DType t, const char* op);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Beside an integer x, a whole bound past x's dtype on the side that holds every value is no
// bound (clamp(u8, -1, 300) leaves x as it is); on the other side it is an mdl::Error.
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// Reductions. dims empty = all dims.
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
// The same, its result in out_dtype: an f16/bf16 sum or mean in f32 is written as accumulated.
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype);
std::pair<Tensor, Tensor> max_min(bool is_max, const Tensor& x, int64_t dim, bool keepdim);  // values, indices
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim);
// Reduces a gradient of broadcast shape back to `shape` (sum over broadcast dims).
Tensor sum_to(const Tensor& x, const Shape& shape);

Tensor softmax(const Tensor& x, int64_t dim, bool log);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log);

// Linear algebra.
Tensor matmul(const Tensor& a, const Tensor& b);
// The same with an f32 result from f16/bf16 a and b: the products' f32 sums, never rounded to 16 bits.
// out_dtype is a's dtype or (for f16/bf16 a) f32.
Tensor matmul(const Tensor& a, const Tensor& b, DType out_dtype);

// Joining, splitting, indexing.
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor tril(const Tensor& x, int64_t k);
Tensor triu(const Tensor& x, int64_t k);
Tensor one_hot(const Tensor& index, int64_t num_classes);

}  // namespace mdl::native
