// The per-element functor of the GPU's binary kernels (binary.cu, binary_scalar.cu): each operand
// read in its own element type and widened to the compute type's acc_t, the formula of
// kernels/binary_math.h, and integer division by zero or a negative integer power sent to the
// device error record (cuda/runtime/device_errors.cuh).
#pragma once
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "cuda/runtime/device_errors.cuh"
#include "kernels/binary_math.h"

namespace mdl::cuda::detail {

// T: the compute dtype's device type; TA, TB: the operands' (T unless kernels::binary_takes_mixed).
template <class T, BinaryOp OP, class TA = T, class TB = T>
struct BinaryMath {
  using A = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
  using O = std::conditional_t<is_comparison(OP), bool, T>;
  static constexpr bool can_fail = std::is_integral_v<A> && (OP == BinaryOp::Div || OP == BinaryOp::Pow);

  DeviceErrorRecord* errors;  // null where no error can occur
  int dtype;                  // the compute DType, for the message

  explicit BinaryMath(DType compute) : errors(can_fail ? device_errors() : nullptr), dtype(int(compute)) {}

  __device__ O operator()(TA xa, TB xb) const {
    const A a = A(to_acc(xa)), b = A(to_acc(xb));
    bool flagged = false;
    const auto r = binary_apply<OP, A>(a, b, flagged);
    if (flagged)  // the host's message names the op from the code (a device string would not do)
      report_device_error(
          errors, OP == BinaryOp::Pow ? DeviceErrorCode::NegativeIntegerPower : DeviceErrorCode::IntegerDivisionByZero,
          nullptr, nullptr, dtype, 0, 0);
    return convert<O>(r);
  }
};

}  // namespace mdl::cuda::detail
