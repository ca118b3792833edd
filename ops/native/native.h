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
void fill_(const Tensor& x, double value);

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
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor scalar_like(double value,
                   const Tensor& like);  // 0-dim tensor of like's dtype (f32 for integral like + fractional value)
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// Reductions. dims empty = all dims.
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);
std::pair<Tensor, Tensor> max_min(bool is_max, const Tensor& x, int64_t dim, bool keepdim);  // values, indices
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim);
// Reduces a gradient of broadcast shape back to `shape` (sum over broadcast dims).
Tensor sum_to(const Tensor& x, const Shape& shape);

Tensor softmax(const Tensor& x, int64_t dim, bool log);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim, bool log);

// Linear algebra.
Tensor matmul(const Tensor& a, const Tensor& b);

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
