// Elementwise binary ops and where on the GPU; operands arrive expanded to out's shape (stride 0
// on broadcast dims). Arithmetic runs in acc_t, comparisons write bool. Integer division by zero
// and negative integer powers go to the device error record (cuda/runtime/device_errors.cuh): no
// host sync here; the mdl::Error comes at the next synchronisation (cuda::check_errors, item(), ...).
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "cuda/runtime/device_errors.cuh"
#include "kernels/binary_math.h"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T, BinaryOp OP>
struct BinaryMath {
  DeviceErrorRecord* errors;  // gets integer division by zero / negative integer powers
  int dtype;                  // the operands' DType, for the message
  using A = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
  using O = std::conditional_t<is_comparison(OP), bool, T>;
  __device__ O operator()(T xa, T xb) const {
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

template <class T, BinaryOp OP>
void binary_launch(const Tensor& out, const Tensor& a, const Tensor& b) {
  using F = BinaryMath<T, OP>;
  constexpr bool can_fail = std::is_integral_v<typename F::A> && (OP == BinaryOp::Div || OP == BinaryOp::Pow);
  launch_map<typename F::O, T, T>("binary", out, {&a, &b}, F{can_fail ? device_errors() : nullptr, int(a.dtype())});
}

template <class T, BinaryOp... OPS>
void binary_switch(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  ((op == OPS ? binary_launch<T, OPS>(out, a, b) : void()), ...);
}

template <class T>
struct Select {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch<DeviceTypes>(a.dtype(), "binary", [&]<class T>() {
    using enum BinaryOp;
    binary_switch<T, Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluBackward, AddRelu, Eq, Ne, Lt, Le, Gt, Ge>(op, out,
                                                                                                               a, b);
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch<DeviceTypes>(out.dtype(), "where", [&]<class T>() {
    launch_map<T, bool, T, T>("where", out, {&cond, &a, &b}, Select<T>{});
  });
}

}  // namespace mdl::cuda
