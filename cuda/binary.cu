// Elementwise binary ops and where on the GPU; operands arrive expanded to out's shape (stride 0
// on broadcast dims). Arithmetic runs in acc_t, comparisons write bool (cuda/binary.cuh). An f32
// op on an f32 and an f16 or bf16 operand reads each in its own dtype (kernels::binary_takes_mixed).
// Integer division by zero and negative integer powers go to the device error record: no host sync
// here; the mdl::Error comes at the next synchronisation (cuda::check_errors, item(), ...).
#include "cuda/binary.cuh"
#include "cuda/kernels.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T, BinaryOp OP, class TA = T, class TB = T>
void binary_launch(const Tensor& out, const Tensor& a, const Tensor& b) {
  using F = BinaryMath<T, OP, TA, TB>;
  if constexpr (std::is_same_v<TA, T> && std::is_same_v<TB, T>) {
    launch_map<typename F::O, TA, TB>("binary", out, {&a, &b}, F(a.dtype()));
  } else if constexpr (kernels::binary_op_takes_mixed(OP)) {
    launch_map<typename F::O, TA, TB>("binary", out, {&a, &b}, F(kF32));
  }
}

template <class T, class TA, class TB, BinaryOp... OPS>
void binary_switch(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  ((op == OPS ? binary_launch<T, OPS, TA, TB>(out, a, b) : void()), ...);
}

template <class T, class TA = T, class TB = T>
void binary_ops(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  using enum BinaryOp;
  binary_switch<T, TA, TB, Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluBackward, AddRelu, Eq, Ne, Lt, Le, Gt, Ge>(
      op, out, a, b);
}

// An f32 op on f32 and f16/bf16 operands, in either order.
void binary_mixed(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  MDL_CHECK(kernels::binary_takes_mixed(out.device(), op, out.dtype(), a.dtype(), b.dtype()), binary_op_name(op),
            ": the CUDA kernel takes operands of dtypes ", a.dtype(), " and ", b.dtype(), " computing in ", out.dtype(),
            " only where kernels::binary_takes_mixed allows it");
  const DType narrow = a.dtype() == kF32 ? b.dtype() : a.dtype();
  auto with = [&]<class H>() {
    if (a.dtype() == kF32) binary_ops<float, float, H>(op, out, a, b);
    else binary_ops<float, H, float>(op, out, a, b);
  };
  if (narrow == kF16) with.template operator()<half>();
  else with.template operator()<bf16>();
}

template <class T>
struct Select {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) return binary_mixed(op, out, a, b);
  dispatch<DeviceTypes>(a.dtype(), "binary", [&]<class T>() { binary_ops<T>(op, out, a, b); });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch<DeviceTypes>(out.dtype(), "where", [&]<class T>() {
    launch_map<T, bool, T, T>("where", out, {&cond, &a, &b}, Select<T>{});
  });
}

}  // namespace mdl::cuda
