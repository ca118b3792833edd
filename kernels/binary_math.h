// The binary ops on two values of the compute type A, written once for both backends
// (cpu/binary.cpp, cuda/binary.cu). Integer division by zero and integer powers with a negative
// exponent set `bad` (the caller turns it into an mdl::Error) instead of trapping; integer
// arithmetic wraps like two's complement, never undefined behaviour.
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/host_device.h"
#include "kernels/op_kinds.h"

namespace mdl {

template <class A>
MDL_HOST_DEVICE bool is_negative(A x) {
  if constexpr (std::is_signed_v<A>) return x < A(0);
  else return false;
}

template <class A>
MDL_HOST_DEVICE A int_pow(A base, A exp, bool& bad) {
  if (is_negative(exp)) {
    bad = true;
    return A(0);
  }
  using U = std::make_unsigned_t<A>;
  U result = 1, b = U(base);
  for (A e = exp; e > 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return A(result);
}

// a + b, a - b and a * b; integers (not bool) in their unsigned type, which wraps where the
// signed type's overflow would be undefined behaviour.
template <BinaryOp OP, class A>
MDL_HOST_DEVICE A arith(A a, A b) {
  if constexpr (std::is_integral_v<A> && !std::is_same_v<A, bool>) {
    using U = std::make_unsigned_t<A>;
    if constexpr (OP == BinaryOp::Add) return A(U(a) + U(b));
    else if constexpr (OP == BinaryOp::Sub) return A(U(a) - U(b));
    else return A(U(a) * U(b));
  } else {
    if constexpr (OP == BinaryOp::Add) return A(a + b);
    else if constexpr (OP == BinaryOp::Sub) return A(a - b);
    else return A(a * b);
  }
}

// op(a, b): A for arithmetic, bool for comparisons. maximum/minimum propagate NaN.
template <BinaryOp OP, class A>
MDL_HOST_DEVICE auto binary_apply(A a, A b, bool& bad) {
  if constexpr (OP == BinaryOp::Add || OP == BinaryOp::Sub || OP == BinaryOp::Mul) return arith<OP>(a, b);
  else if constexpr (OP == BinaryOp::Div) {
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      if (b == 0) {
        bad = true;
        return A(0);
      }
      if (b == A(-1)) return A(U(0) - U(a));  // INT_MIN / -1 wraps instead of trapping
      return A(a / b);
    } else {
      return A(a / b);
    }
  } else if constexpr (OP == BinaryOp::Pow) {
    if constexpr (std::is_integral_v<A>) return int_pow(a, b, bad);
    else return A(std::pow(a, b));
  } else if constexpr (OP == BinaryOp::Maximum) return (a != a) ? a : (b != b) ? b : (a > b ? a : b);
  else if constexpr (OP == BinaryOp::Minimum) return (a != a) ? a : (b != b) ? b : (a < b ? a : b);
  else if constexpr (OP == BinaryOp::ReluBackward) return b <= A(0) ? A(0) : a;  // a: grad, b: relu's input
  else if constexpr (OP == BinaryOp::AddRelu) {  // relu(a + b) as UnaryOp::Relu: NaN stays NaN
    const A s = arith<BinaryOp::Add>(a, b);
    return s > A(0) ? s : (s != s ? s : A(0));
  } else if constexpr (OP == BinaryOp::Eq) return a == b;
  else if constexpr (OP == BinaryOp::Ne) return a != b;
  else if constexpr (OP == BinaryOp::Lt) return a < b;
  else if constexpr (OP == BinaryOp::Le) return a <= b;
  else if constexpr (OP == BinaryOp::Gt) return a > b;
  else return a >= b;
}

}  // namespace mdl
