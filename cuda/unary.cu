// Elementwise unary math on the GPU: out = op(in), computed in acc_t (float for f16/bf16) and
// rounded once, as the CPU backend does. Integer dtypes take Neg/Abs/Square/Sign (wrapping).
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class A>
__device__ __forceinline__ A sigmoid_of(A x) {
  if (x >= A(0)) return A(1) / (A(1) + exp(-x));
  const A e = exp(x);
  return e / (A(1) + e);
}

template <class T, UnaryOp OP>
struct UnaryFloat {
  __device__ T operator()(T in) const {
    using A = acc_t<T>;
    const A x = to_acc(in);
    constexpr A kSqrt1_2 = A(0.70710678118654752440);
    constexpr A kSqrt2OverPi = A(0.79788456080286535588);
    A r;
    if constexpr (OP == UnaryOp::Neg) r = -x;
    else if constexpr (OP == UnaryOp::Abs) r = fabs(x);
    else if constexpr (OP == UnaryOp::Exp) r = exp(x);
    else if constexpr (OP == UnaryOp::Log) r = log(x);
    else if constexpr (OP == UnaryOp::Sqrt) r = sqrt(x);
    else if constexpr (OP == UnaryOp::Rsqrt) r = A(1) / sqrt(x);
    else if constexpr (OP == UnaryOp::Sin) r = sin(x);
    else if constexpr (OP == UnaryOp::Cos) r = cos(x);
    else if constexpr (OP == UnaryOp::Tanh) r = tanh(x);
    else if constexpr (OP == UnaryOp::Sigmoid) r = sigmoid_of(x);
    else if constexpr (OP == UnaryOp::Relu) r = x > A(0) ? x : (x != x ? x : A(0));
    else if constexpr (OP == UnaryOp::Gelu) r = A(0.5) * x * (A(1) + erf(x * kSqrt1_2));
    else if constexpr (OP == UnaryOp::GeluTanh) r = A(0.5) * x * (A(1) + tanh(kSqrt2OverPi * (x + A(0.044715) * x * x * x)));
    else if constexpr (OP == UnaryOp::Silu) r = x * sigmoid_of(x);
    else if constexpr (OP == UnaryOp::Square) r = x * x;
    else if constexpr (OP == UnaryOp::Reciprocal) r = A(1) / x;
    else if constexpr (OP == UnaryOp::Sign) r = A((x > A(0)) - (x < A(0)));
    else if constexpr (OP == UnaryOp::Log1p) r = log1p(x);
    else r = expm1(x);
    return convert<T>(r);
  }
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
  dispatch_all(in.dtype(), "unary", [&]<class T>() {
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
