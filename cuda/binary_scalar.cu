// A binary op between a tensor and a host scalar on the GPU (kernels::binary_scalar). The scalar's
// value travels in the functor, so the op is one launch over the tensor alone, 16 bytes per thread
// where the tensor is contiguous and aligned (launch_map with one input): no fill and no copy of
// the scalar. Each element is binary's (cuda/binary.cuh), so the result equals binary's on the
// scalar as a stride-0 operand, bit for bit.
#include <cstring>

#include "cuda/binary.cuh"
#include "cuda/kernels.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T, BinaryOp OP>
struct ScalarMath {
  BinaryMath<T, OP> f;
  T s;        // the scalar in the compute dtype, the host tensor's bits
  bool left;  // op(s, x) rather than op(x, s)
  __device__ typename BinaryMath<T, OP>::O operator()(T x) const { return left ? f(s, x) : f(x, s); }
};

template <class T, BinaryOp OP>
void scalar_launch(const Tensor& out, const Tensor& x, T s, bool left) {
  launch_map<typename BinaryMath<T, OP>::O, T>("binary", out, {&x},
                                               ScalarMath<T, OP>{BinaryMath<T, OP>(x.dtype()), s, left});
}

template <class T, BinaryOp... OPS>
void scalar_switch(BinaryOp op, const Tensor& out, const Tensor& x, T s, bool left) {
  ((op == OPS ? scalar_launch<T, OPS>(out, x, s, left) : void()), ...);
}

}  // namespace

void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& s, bool scalar_left) {
  MDL_CHECK(s.dim() == 0 && s.device().is_cpu() && s.dtype() == x.dtype(), binary_op_name(op),
            ": the scalar operand must be a 0-d CPU tensor of dtype ", x.dtype(), ", got ", s.dim(), "-d ", s.dtype(),
            " on ", s.device());
  dispatch<DeviceTypes>(x.dtype(), "binary", [&]<class T>() {
    T v;
    std::memcpy(&v, s.raw_data(), sizeof(T));  // f16 and bf16 too: the device types hold the host's bits
    using enum BinaryOp;
    scalar_switch<T, Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluBackward, AddRelu, Eq, Ne, Lt, Le, Gt, Ge>(
        op, out, x, v, scalar_left);
  });
}

}  // namespace mdl::cuda
