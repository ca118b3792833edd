// GELU's backward on the GPU: grad_x = grad_out * gelu'(x), one elementwise launch, in float
// (double for f64), the same formulas as the CPU's (cpu/gelu_backward.cpp).
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "kernels/gelu.h"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class T>
struct GeluGrad {
  bool tanh_approx;
  __device__ T operator()(T g, T xin) const {
    using A = acc_t<T>;
    const A x = to_acc(xin);
    A d;
    if (tanh_approx) {
      const A k = A(0.7978845608028654), c = A(0.044715);
      const A t = tanh(k * (x + c * x * x * x));
      d = A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * k * (A(1) + A(3) * c * x * x);
    } else {
      d = A(0.5) * (A(1) + erf(x * A(0.7071067811865476))) + x * A(0.3989422804014327) * exp(A(-0.5) * x * x);
    }
    return convert<T>(to_acc(g) * d);
  }
};

}  // namespace

void gelu_backward(const Tensor& grad_x, const Tensor& grad_out, const Tensor& x, bool tanh_approx) {
  dispatch_float(grad_x.dtype(), "gelu_backward", [&]<class T>() {
    launch_map<T, T, T>("gelu_backward", grad_x, {&grad_out, &x}, GeluGrad<T>{tanh_approx});
  });
}

}  // namespace mdl::cuda
