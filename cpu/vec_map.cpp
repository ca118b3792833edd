// vec_map's 4-float (SSE2) width, the run-time choice between it and the AVX2 and AVX-512 ones, and
// the scalar loop the vector_math switch falls back to.
#include <atomic>

#include "cpu/cpu_features.h"
#include "cpu/vec_map_impl.h"
#include "kernels/unary_math.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

namespace {

template <class F>
void scalar_loop(float* o, const float* x, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
}

}  // namespace


void scalar_map(VecFn f, float* o, const float* x, int64_t n) {
  switch (f) {
    case VecFn::Exp: return scalar_loop(o, x, n, [](float v) { return unary_apply<UnaryOp::Exp>(v); });
    case VecFn::Tanh: return scalar_loop(o, x, n, [](float v) { return unary_apply<UnaryOp::Tanh>(v); });
    case VecFn::Sigmoid: return scalar_loop(o, x, n, [](float v) { return unary_apply<UnaryOp::Sigmoid>(v); });
    case VecFn::Silu: return scalar_loop(o, x, n, [](float v) { return unary_apply<UnaryOp::Silu>(v); });
    case VecFn::Gelu: return scalar_loop(o, x, n, [](float v) { return gelu_math::gelu(v); });
    case VecFn::GeluGrad: return scalar_loop(o, x, n, [](float v) { return gelu_math::gelu_grad(v); });
    case VecFn::GeluTanh: return scalar_loop(o, x, n, [](float v) { return gelu_math::gelu_tanh(v); });
    case VecFn::GeluTanhGrad: return scalar_loop(o, x, n, [](float v) { return gelu_math::gelu_tanh_grad(v); });
  }
}

void vec_map4(VecFn f, float* o, const float* x, int64_t n) {
  using f4 = float __attribute__((vector_size(16)));
  detail::map_fn<f4>(f, o, x, n);
}

void vec_map(VecFn f, float* o, const float* x, int64_t n) {
  if (!toggles::vector_math()) return scalar_map(f, o, x, n);
  if (has_avx512f() && toggles::avx512_vec_math()) return vec_map16(f, o, x, n);
  if (has_avx2_fma()) return vec_map8(f, o, x, n);
  vec_map4(f, o, x, n);
}

}  // namespace mdl::cpu
