// The body of vec_map for one vector width V, included by vec_map.cpp (4 floats),
// vec_map_avx2.cpp (8 floats, compiled for AVX2 and FMA) and vec_map_avx512.cpp (16, AVX-512F).
#pragma once
#include <cstdint>
#include <cstring>

#include "cpu/vec_map.h"
#include "cpu/vec_math.h"

namespace mdl::cpu::detail {

template <class V, class F>
[[gnu::always_inline]] inline void map_loop(float* o, const float* x, int64_t n, const F& f) {
  constexpr int64_t W = sizeof(V) / sizeof(float);
  int64_t i = 0;
  V v;
  for (; i + W <= n; i += W) {
    std::memcpy(&v, x + i, sizeof v);
    v = f(v);
    std::memcpy(o + i, &v, sizeof v);
  }
  if (i < n) {
    float tail[W] = {};
    std::memcpy(tail, x + i, size_t(n - i) * sizeof(float));
    std::memcpy(&v, tail, sizeof v);
    v = f(v);
    std::memcpy(tail, &v, sizeof v);
    std::memcpy(o + i, tail, size_t(n - i) * sizeof(float));
  }
}

// Function objects rather than lambdas: GCC does not give a lambda the target of the
// #pragma around it, and an 8-float lambda compiled for SSE2 would be slow.
#define MDL_VEC_FN(Name, expr)                       \
  struct Name {                                      \
    template <class V>                               \
    [[gnu::always_inline]] V operator()(V v) const { \
      return expr;                                   \
    }                                                \
  }
MDL_VEC_FN(ExpFn, vecmath::exp_v(v));
MDL_VEC_FN(TanhFn, vecmath::tanh_v(v));
MDL_VEC_FN(SigmoidFn, vecmath::sigmoid_v(v));
MDL_VEC_FN(SiluFn, v* vecmath::sigmoid_v(v));
MDL_VEC_FN(GeluFn, vecmath::gelu_v(v));
MDL_VEC_FN(GeluGradFn, vecmath::gelu_grad_v(v));
MDL_VEC_FN(GeluTanhFn, vecmath::gelu_tanh_v(v));
MDL_VEC_FN(GeluTanhGradFn, vecmath::gelu_tanh_grad_v(v));
#undef MDL_VEC_FN

template <class V>
void map_fn(VecFn fn, float* o, const float* x, int64_t n) {
  switch (fn) {
    case VecFn::Exp: return map_loop<V>(o, x, n, ExpFn{});
    case VecFn::Tanh: return map_loop<V>(o, x, n, TanhFn{});
    case VecFn::Sigmoid: return map_loop<V>(o, x, n, SigmoidFn{});
    case VecFn::Silu: return map_loop<V>(o, x, n, SiluFn{});
    case VecFn::Gelu: return map_loop<V>(o, x, n, GeluFn{});
    case VecFn::GeluGrad: return map_loop<V>(o, x, n, GeluGradFn{});
    case VecFn::GeluTanh: return map_loop<V>(o, x, n, GeluTanhFn{});
    case VecFn::GeluTanhGrad: return map_loop<V>(o, x, n, GeluTanhGradFn{});
  }
}

}  // namespace mdl::cpu::detail
