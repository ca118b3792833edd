// GELU and its derivative, exact (erf) and tanh forms, on one scalar of the compute type A (float
// or double), through <cmath>: the unary op, the fused linear and GELU's backward share them. The
// float-vector forms are in vec_math.h.
#pragma once
#include <cmath>

namespace mdl::cpu::gelu_math {

constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588, kCubic = 0.044715;

template <class A>
A gelu(A x) {
  return A(0.5) * x * (A(1) + std::erf(x * A(kSqrtHalf)));
}
template <class A>
A gelu_tanh(A x) {
  return A(0.5) * x * (A(1) + std::tanh(A(kSqrt2OverPi) * (x + A(kCubic) * x * x * x)));
}
// Phi(x) + x phi(x).
template <class A>
A gelu_grad(A x) {
  return A(0.5) * (A(1) + std::erf(x * A(kSqrtHalf))) + x * A(kInvSqrt2Pi) * std::exp(A(-0.5) * x * x);
}
template <class A>
A gelu_tanh_grad(A x) {
  const A t = std::tanh(A(kSqrt2OverPi) * (x + A(kCubic) * x * x * x));
  return A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * x * x);
}

}  // namespace mdl::cpu::gelu_math
