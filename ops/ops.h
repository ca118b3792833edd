// The public ops: what users call. Each records its backward when autograd needs it.
// Names and semantics follow libtorch's.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mdl {

// Views (share storage) and copies.
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor clone(const Tensor& x);
Tensor contiguous(const Tensor& x, MemoryFormat f);  // x when already in f, else a copy in f (differentiable)
Tensor to_dtype(const Tensor& x, DType t);
Tensor to_device(const Tensor& x, Device d);

// Elementwise binary, with NumPy broadcasting and type promotion.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
// True division, as torch.div: integers divide in f32, so x / 0 is inf or NaN on both devices.
// (The binary kernel's integer division by zero, reached by direct kernel calls, is an mdl::Error
// "div: integer division by zero": at once on the CPU, at the next sync point on the GPU, see
// cuda::check_errors.)
Tensor div(const Tensor& a, const Tensor& b);
// Integers to negative integer powers are an mdl::Error naming pow, raised as integer division
// by zero is.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);  // an integer a refuses an exponent its dtype cannot hold
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Comparisons give Bool tensors and no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
// A double beside a tensor: C++ cannot tell 2 from 2.0, so a whole s beside an integer tensor acts
// as a Python int does (u8 + 2 stays u8; u8 + -1 wraps to x - 1), a fractional one as a Python
// float (i64 * 0.5 is f32). Division is true division: s keeps its value (u8 / -1.0 is -x, f32).
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor operator-(const Tensor& a);

// Elementwise unary.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);                                           // integer x keeps its dtype
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // or "tanh"
// relu(a + b) in one pass (BinaryOp::AddRelu), a residual block's end; its backward is relu's.
Tensor add_relu(const Tensor& a, const Tensor& b);
Tensor silu(const Tensor& x);
Tensor square(const Tensor& x);
// Beside an integer x a whole bound past x's dtype on the side that holds every value bounds
// nothing (clamp(u8, -1, 300) is x); on the other side it is an mdl::Error.
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// Reductions; dims empty means all dims.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction = 1, bool keepdim = false);

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// 1-D, 2-D, batched and broadcast-batched matrix products, as torch.matmul.
Tensor matmul(const Tensor& a, const Tensor& b);

// Selection, joining, indexing.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);  // I64 result

// Comparison helper for tests and users: all |a-b| <= atol + rtol*|b| (computed in f64).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace mdl
