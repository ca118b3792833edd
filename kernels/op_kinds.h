// The elementwise and reduction op kinds the kernels take, each listed once with its printed name
// and whether autograd differentiates it: the enums, the names (unary_op_name, ...) and the
// differentiable ops ops/elementwise.cpp registers are all generated from these lists.
#pragma once
#include <cstdint>

// X(Enum, "name", differentiable)
// clang-format off
#define MDL_UNARY_OPS(X)             \
  X(Neg, "neg", true)                \
  X(Abs, "abs", true)                \
  X(Exp, "exp", true)                \
  X(Log, "log", true)                \
  X(Sqrt, "sqrt", true)              \
  X(Rsqrt, "rsqrt", true)            \
  X(Sin, "sin", true)                \
  X(Cos, "cos", true)                \
  X(Tanh, "tanh", true)              \
  X(Sigmoid, "sigmoid", true)        \
  X(Relu, "relu", true)              \
  X(Gelu, "gelu", true)              \
  X(GeluTanh, "gelu_tanh", true)     \
  X(Silu, "silu", true)              \
  X(Square, "square", true)          \
  X(Reciprocal, "reciprocal", false) \
  X(Sign, "sign", false)             \
  X(Log1p, "log1p", false)           \
  X(Expm1, "expm1", false)
// Comparisons come last (is_comparison relies on it).
#define MDL_BINARY_OPS(X)     \
  X(Add, "add", true)         \
  X(Sub, "sub", true)         \
  X(Mul, "mul", true)         \
  X(Div, "div", true)         \
  X(Pow, "pow", true)         \
  X(Maximum, "maximum", true) \
  X(Minimum, "minimum", true) \
  X(ReluBackward, "relu_backward", false) \
  X(AddRelu, "add_relu", true)            \
  X(Eq, "eq", false)          \
  X(Ne, "ne", false)          \
  X(Lt, "lt", false)          \
  X(Le, "le", false)          \
  X(Gt, "gt", false)          \
  X(Ge, "ge", false)
// Reductions have their own nodes (sum, mean, max_dim, ...), registered in ops/reduce.cpp.
#define MDL_REDUCE_OPS(X) \
  X(Sum, "sum", false)    \
  X(Mean, "mean", false)  \
  X(Max, "max", false)    \
  X(Min, "min", false)    \
  X(Prod, "prod", false)
// clang-format on

namespace mdl {

#define MDL_OP_ENUMERATOR(e, name, diff) e,
enum class UnaryOp : uint8_t { MDL_UNARY_OPS(MDL_OP_ENUMERATOR) };
enum class BinaryOp : uint8_t { MDL_BINARY_OPS(MDL_OP_ENUMERATOR) };
enum class ReduceOp : uint8_t { MDL_REDUCE_OPS(MDL_OP_ENUMERATOR) };
#undef MDL_OP_ENUMERATOR

#define MDL_OP_NAME(e, name, diff) name,
inline const char* unary_op_name(UnaryOp op) {
  static constexpr const char* names[] = {MDL_UNARY_OPS(MDL_OP_NAME)};
  return names[int(op)];
}
inline const char* binary_op_name(BinaryOp op) {
  static constexpr const char* names[] = {MDL_BINARY_OPS(MDL_OP_NAME)};
  return names[int(op)];
}
inline const char* reduce_op_name(ReduceOp op) {
  static constexpr const char* names[] = {MDL_REDUCE_OPS(MDL_OP_NAME)};
  return names[int(op)];
}
#undef MDL_OP_NAME

constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

}  // namespace mdl
