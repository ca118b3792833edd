// GELU and its derivative, exact (erf) and tanh forms, on one scalar of the compute type A (float
// or double), on both backends: the unary op, the fused linear's epilogue and GELU's backward use
// them on the CPU and on CUDA. The CPU's float-vector forms are in cpu/vec_math.h.
#pragma once
#include <cmath>

#include "kernels/host_device.h"

namespace mdl::gelu_math {

constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588, kCubic = 0.044715;

template <class A>
MDL_HOST_DEVICE A gelu(A x) {
  return A(0.5) * x * (A(1) + std::erf(x * A(kSqrtHalf)));
}
template <class A>
MDL_HOST_DEVICE A gelu_tanh(A x) {
  return A(0.5) * x * (A(1) + std::tanh(A(kSqrt2OverPi) * (x + A(kCubic) * x * x * x)));
}
// Phi(x) + x phi(x).
template <class A>
MDL_HOST_DEVICE A gelu_grad(A x) {
  return A(0.5) * (A(1) + std::erf(x * A(kSqrtHalf))) + x * A(kInvSqrt2Pi) * std::exp(A(-0.5) * x * x);
}
template <class A>
MDL_HOST_DEVICE A gelu_tanh_grad(A x) {
  const A t = std::tanh(A(kSqrt2OverPi) * (x + A(kCubic) * x * x * x));
  return A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * A(kSqrt2OverPi) * (A(1) + A(3 * kCubic) * x * x);
}

}  // namespace mdl::gelu_math
