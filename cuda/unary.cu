// Elementwise unary math on the GPU: out = op(in), computed in acc_t (float for f16/bf16) and
// rounded once, as the CPU backend does. Integer dtypes take Neg/Abs/Square/Sign (wrapping) and Relu.
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "kernels/unary_math.h"

namespace mdl::cuda {

using namespace detail;

namespace {

// The math is kernels/unary_math.h's, the CPU's expression for each op.
template <class T, UnaryOp OP>
struct UnaryFloat {
  __device__ T operator()(T in) const { return convert<T>(unary_apply<OP>(to_acc(in))); }
};

template <class T>
struct UnaryInt {
  UnaryOp op;
  __device__ T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>) {
      return x;
    } else {
      using U = std::make_unsigned_t<T>;
      switch (op) {
        case UnaryOp::Neg: return T(U(0) - U(x));
        case UnaryOp::Abs: return negative(x) ? T(U(0) - U(x)) : x;
        case UnaryOp::Square: return T(U(x) * U(x));
        case UnaryOp::Sign: return T((x > 0) - negative(x));
        case UnaryOp::Relu: return x > 0 ? x : T(0);
        default: return x;
      }
    }
  }
};

template <class T, UnaryOp... OPS>
void unary_switch(UnaryOp op, const Tensor& out, const Tensor& in) {
  ((op == OPS ? launch_map<T, T>("unary", out, {&in}, UnaryFloat<T, OPS>{}) : void()), ...);
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch<DeviceTypes>(in.dtype(), "unary", [&]<class T>() {
    if constexpr (!is_float_v<T>) {
      launch_map<T, T>("unary", out, {&in}, UnaryInt<T>{op});
    } else {
      using enum UnaryOp;
      unary_switch<T, Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu, Square,
                   Reciprocal, Sign, Log1p, Expm1>(op, out, in);
    }
  });
}

}  // namespace mdl::cuda
