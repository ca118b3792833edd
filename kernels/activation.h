// The activations a fused linear layer applies in its GEMM epilogue: none, ReLU, and GELU with
// the tanh approximation (PyTorch's approximate='tanh', cuBLASLt's GELU epilogue).
#pragma once
#include <cstdint>

namespace mdl {

enum class Activation : uint8_t { None, Relu, GeluTanh };

constexpr const char* activation_name(Activation a) {
  return a == Activation::Relu ? "relu" : a == Activation::GeluTanh ? "gelu_tanh" : "none";
}

}  // namespace mdl
