// The kernel contract: the primitives every backend implements. Each is a Stub with a CPU
// slot and a CUDA slot; ops (tensor/native.h) check arguments, allocate outputs and call the
// stub for the tensors' device. A slot the build lacks throws "<op>: no CUDA kernel in this build".
// Kernels receive outputs already allocated with the right shape and dtype; inputs may have any
// strides (including 0 for broadcast dims) unless the primitive says otherwise.
#pragma once
#include <cstdint>
#include <vector>

#include "profiler/hook.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace mdl {

// Fills the CPU slots on first use (static-library safe: no static initialisers needed).
namespace kernels { void ensure_kernels_registered(); }

template <class Fn>
struct Stub {
  const char* name;
  Fn* cpu = nullptr;
  Fn* cuda = nullptr;

  Fn* get(Device d) const {
    kernels::ensure_kernels_registered();
    Fn* f = d.is_cpu() ? cpu : cuda;
    MDL_CHECK(f, name, ": no ", d.is_cpu() ? "CPU" : "CUDA", " kernel in this build");
    return f;
  }
  // Runs the slot for d; an active profiler session records the call (profiler/hook.h).
  template <class... Args>
  decltype(auto) operator()(Device d, Args&&... args) const {
    Fn* f = get(d);
    if (profiler::detail::recording()) [[unlikely]] {
      const Tensor* tensors[] = {profiler::detail::tensor_or_null(args)..., nullptr};
      profiler::detail::KernelRange range(name, d, tensors, int(sizeof...(Args)));
      return f(std::forward<Args>(args)...);
    }
    return f(std::forward<Args>(args)...);
  }
};

enum class UnaryOp : uint8_t {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu,
  Square, Reciprocal, Sign, Log1p, Expm1,
};
enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge,
};
enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod };

const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);
const char* reduce_op_name(ReduceOp op);
constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

namespace kernels {

// out[...] = value.
using FillFn = void(const Tensor& out, double value);
// dst[...] = cast(src[...]); same shape, any strides and dtypes, same device.
using CopyFn = void(const Tensor& dst, const Tensor& src);
// out = op(in); out contiguous; same dtype (floating unless op is Neg/Abs/Square/Sign).
using UnaryFn = void(UnaryOp op, const Tensor& out, const Tensor& in);
// out = op(a, b); a and b expanded to out's shape, both of the compute dtype;
// out has that dtype, or Bool for comparisons.
using BinaryFn = void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
// out = cond ? a : b; all expanded to out's shape; cond Bool; a, b of out's dtype.
using WhereFn = void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// out = reduce(in) over the dims where reduce_mask[d] is true; out has in's rank (keepdim form).
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
using BmmFn = void(const Tensor& out, const Tensor& a, const Tensor& b);
// out = in.index_select(dim, index); index 1-D I64 (checked in range by the op).
using IndexSelectFn = void(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
// out[i][j] = in[i][index[i][j]] (along dim); index I64, out contiguous with index's shape.
using GatherFn = void(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index);
// out (already holding a copy of self) += src scattered along dim at index.
using ScatterAddFn = void(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// out = index_add: out.index_select(dim, index) += src, accumulating repeats (backward of index_select).
using IndexAddFn = void(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
// Keeps the lower (upper=false) or upper triangle of the last two dims, offset k; zeros elsewhere.
using TriFn = void(const Tensor& out, const Tensor& in, int64_t k, bool upper);

inline Stub<FillFn> fill{"fill"};
inline Stub<CopyFn> copy{"copy"};
inline Stub<UnaryFn> unary{"unary"};
inline Stub<BinaryFn> binary{"binary"};
inline Stub<WhereFn> where{"where"};
inline Stub<ReduceFn> reduce{"reduce"};
inline Stub<ArgReduceFn> arg_reduce{"max/min"};
inline Stub<VarFn> var{"var"};
inline Stub<SoftmaxFn> softmax{"softmax"};
inline Stub<SoftmaxBackwardFn> softmax_backward{"softmax_backward"};
inline Stub<BmmFn> bmm{"matmul"};
inline Stub<IndexSelectFn> index_select{"index_select"};
inline Stub<GatherFn> gather{"gather"};
inline Stub<ScatterAddFn> scatter_add{"scatter_add"};
inline Stub<IndexAddFn> index_add{"index_add"};
inline Stub<TriFn> tri{"tril/triu"};

}  // namespace kernels
}  // namespace mdl
