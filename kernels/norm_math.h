// Batch norm's per-element arithmetic, written once for both backends (cpu/norm.cpp, cuda/norm.cu):
// the inverse std, the per-channel affine coefficients, the pre-activation v = (x - mean) * a + b,
// and the ReLU folded into it, with a residual added before the ReLU where one is given. The
// backward recomputes v with these same functions, so its ReLU mask is the forward's.
#pragma once
#include <cmath>

#include "kernels/host_device.h"

namespace mdl::kernels::norm_math {

// A training batch's 1 / sqrt(var + eps), or 0 where var + eps is 0 (a constant channel with
// eps = 0), as PyTorch's InvStd: the channel's output is then its bias and its gradients 0.
MDL_HOST_DEVICE double inv_std(double var, double eps) {
  const double v = var + eps;
  return v == 0.0 ? 0.0 : 1.0 / ::sqrt(v);
}

// Channel c's y = (x - mean) * a + b with a = w * invstd, from its weight w (1 without affine),
// bias b (0), mean and invstd, in the stat type A. Not x * a + (b - mean * a): where |mean| is many
// stds, x * a and mean * a cancel and leave the rounding of mean * a, ulp(|mean| / std), in y.
template <class A>
struct Affine {
  A a, mean, b;
};
template <class A>
MDL_HOST_DEVICE Affine<A> affine(A w, A b, A mean, A invstd) {
  return {A(w * invstd), mean, b};
}

template <class A>
MDL_HOST_DEVICE A pre_activation(A x, const Affine<A>& k) {
  return (x - k.mean) * k.a + k.b;
}

// The forward's output: relu(v) as UnaryOp::Relu computes it (NaN stays NaN), or v.
template <bool RELU, class A>
MDL_HOST_DEVICE A activate(A v) {
  if constexpr (RELU) return v > A(0) ? v : (v != v ? v : A(0));
  else return v;
}

// The gradient that reaches v: g where the forward's ReLU passed v (as BinaryOp::ReluBackward,
// zero where v <= 0), or g.
template <bool RELU, class A>
MDL_HOST_DEVICE A relu_gate(A g, A v) {
  if constexpr (RELU) return v <= A(0) ? A(0) : g;
  else return g;
}

// The pre-activation with a residual r added (ResNet's bn(x) + identity), or v alone.
template <bool RES, class A>
MDL_HOST_DEVICE A plus_residual(A v, A r) {
  if constexpr (RES) return v + r;
  else return v;
}

// f.template operator()<on>() on the host: a flag (the ReLU, the residual) made a compile-time
// choice, so the plain pass has no test in it.
template <class F>
void with_flag(bool on, F&& f) {
  if (on) f.template operator()<true>();
  else f.template operator()<false>();
}
template <class F>
void with_relu(bool relu, F&& f) {
  with_flag(relu, f);
}

}  // namespace mdl::kernels::norm_math
