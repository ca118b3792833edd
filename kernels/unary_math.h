// The unary ops on one value of the compute type A (float for f16/bf16, else the type itself),
// written once for both backends: cpu/unary.cpp runs them element by element (and on float
// vectors for the exp family), cuda/unary.cu in its elementwise launcher.
#pragma once
#include <cmath>

#include "kernels/gelu_math.h"
#include "kernels/host_device.h"
#include "kernels/op_kinds.h"

namespace mdl {

// 1 / (1 + e^-x) without overflow: e^x / (1 + e^x) for negative x.
template <class A>
MDL_HOST_DEVICE A sigmoid_of(A x) {
  if (x >= A(0)) return A(1) / (A(1) + std::exp(-x));
  const A e = std::exp(x);
  return e / (A(1) + e);
}

template <UnaryOp OP, class A>
MDL_HOST_DEVICE A unary_apply(A x) {
  if constexpr (OP == UnaryOp::Neg) return -x;
  else if constexpr (OP == UnaryOp::Abs) return std::fabs(x);
  else if constexpr (OP == UnaryOp::Exp) return std::exp(x);
  else if constexpr (OP == UnaryOp::Log) return std::log(x);
  else if constexpr (OP == UnaryOp::Sqrt) return std::sqrt(x);
  else if constexpr (OP == UnaryOp::Rsqrt) return A(1) / std::sqrt(x);
  else if constexpr (OP == UnaryOp::Sin) return std::sin(x);
  else if constexpr (OP == UnaryOp::Cos) return std::cos(x);
  else if constexpr (OP == UnaryOp::Tanh) return std::tanh(x);
  else if constexpr (OP == UnaryOp::Sigmoid) return sigmoid_of(x);
  else if constexpr (OP == UnaryOp::Relu) return x > A(0) ? x : (x != x ? x : A(0));  // NaN stays NaN
  else if constexpr (OP == UnaryOp::Gelu) return gelu_math::gelu(x);
  else if constexpr (OP == UnaryOp::GeluTanh) return gelu_math::gelu_tanh(x);
  else if constexpr (OP == UnaryOp::Silu) return x * sigmoid_of(x);
  else if constexpr (OP == UnaryOp::Square) return x * x;
  else if constexpr (OP == UnaryOp::Reciprocal) return A(1) / x;
  else if constexpr (OP == UnaryOp::Sign) return A((x > A(0)) - (x < A(0)));
  else if constexpr (OP == UnaryOp::Log1p) return std::log1p(x);
  else return std::expm1(x);
}

// The same with the op chosen at run time.
template <class A>
MDL_HOST_DEVICE A unary_apply(UnaryOp op, A x) {
  switch (op) {
#define MDL_UNARY_CASE(e, name, differentiable) \
  case UnaryOp::e: return unary_apply<UnaryOp::e>(x);
    MDL_UNARY_OPS(MDL_UNARY_CASE)
#undef MDL_UNARY_CASE
  }
  return x;
}

}  // namespace mdl
