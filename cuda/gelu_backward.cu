// GELU's backward on the GPU: grad_x = grad_out * gelu'(x), one elementwise launch, in float
// (double for f64), with the CPU's formulas (kernels/gelu_math.h).
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "kernels/gelu.h"
#include "kernels/gelu_math.h"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T>
struct GeluGrad {
  bool tanh_approx;
  __device__ T operator()(T g, T xin) const {
    using A = acc_t<T>;
    const A x = to_acc(xin);
    const A d = tanh_approx ? gelu_math::gelu_tanh_grad(x) : gelu_math::gelu_grad(x);
    return convert<T>(to_acc(g) * d);
  }
};

}  // namespace

void gelu_backward(const Tensor& grad_x, const Tensor& grad_out, const Tensor& x, bool tanh_approx) {
  dispatch_floating<DeviceTypes>(grad_x.dtype(), "gelu_backward", [&]<class T>() {
    launch_map<T, T, T>("gelu_backward", grad_x, {&grad_out, &x}, GeluGrad<T>{tanh_approx});
  });
}

}  // namespace mdl::cuda
