// The activations a fused linear layer applies in its GEMM epilogue: none, ReLU, and GELU with
// the tanh approximation (PyTorch's approximate='tanh', cuBLASLt's GELU epilogue), and their math
// on one value of the compute type, shared by the CPU and CUDA epilogues.
#pragma once
#include <cstdint>

#include "kernels/gelu_math.h"
#include "kernels/host_device.h"

namespace mdl {

enum class Activation : uint8_t { None, Relu, GeluTanh };

constexpr const char* activation_name(Activation a) {
  return a == Activation::Relu ? "relu" : a == Activation::GeluTanh ? "gelu_tanh" : "none";
}

template <class A>
MDL_HOST_DEVICE A act_forward(Activation act, A v) {
  if (act == Activation::Relu) return v > A(0) ? v : A(0);
  if (act == Activation::GeluTanh) return gelu_math::gelu_tanh(v);
  return v;
}

// d act / d pre, from the saved value s (out for Relu, pre for GeluTanh).
template <class A>
MDL_HOST_DEVICE A act_derivative(Activation act, A s) {
  if (act == Activation::Relu) return s > A(0) ? A(1) : A(0);
  if (act == Activation::GeluTanh) return gelu_math::gelu_tanh_grad(s);
  return A(1);
}

}  // namespace mdl
