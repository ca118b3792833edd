// Elementwise unary math: out = op(in), computed in acc_t (float for f16/bf16) and rounded once.
// 16-bit and strided inputs go through blocks of floats (float_block.h), so the math loop runs on
// plain floats; exp, sigmoid, silu, tanh and both GELUs run on float vectors (vec_map.h), the rest
// through the shared scalar math (kernels/unary_math.h).
#include <cmath>

#include "kernels/convert.h"
#include "cpu/kernels.h"
#include "cpu/float_block.h"
#include "kernels/unary_math.h"
#include "cpu/loops.h"
#include "cpu/vec_map.h"

namespace mdl::cpu {

namespace {

// exp and the activations built on it run on float vectors (vec_map.h); the rest element by element.
template <UnaryOp OP>
void unary_floats(float* o, const float* x, int64_t n) {
  if constexpr (OP == UnaryOp::Exp) return vec_map(VecFn::Exp, o, x, n);
  if constexpr (OP == UnaryOp::Sigmoid) return vec_map(VecFn::Sigmoid, o, x, n);
  if constexpr (OP == UnaryOp::Silu) return vec_map(VecFn::Silu, o, x, n);
  if constexpr (OP == UnaryOp::Tanh) return vec_map(VecFn::Tanh, o, x, n);
  if constexpr (OP == UnaryOp::Gelu) return vec_map(VecFn::Gelu, o, x, n);
  if constexpr (OP == UnaryOp::GeluTanh) return vec_map(VecFn::GeluTanh, o, x, n);
  for (int64_t i = 0; i < n; ++i) o[i] = unary_apply<OP>(x[i]);
}

// The loop for one op, so the switch is hoisted out of the element loop.
template <class T, UnaryOp OP>
void unary_loop(const Tensor& out, const Tensor& in) {
  using A = acc_t<T>;
  StridedLoop<2> loop({&out, &in});
  loop.run([&](char* const* p, const int64_t* s, int64_t n) {
    const bool contiguous = s[0] == sizeof(T) && s[1] == sizeof(T);
    if constexpr (std::is_same_v<T, float>) {
      if (contiguous) return unary_floats<OP>(reinterpret_cast<float*>(p[0]), reinterpret_cast<const float*>(p[1]), n);
    }
    // 16-bit and strided floats go through a float buffer, so every layout gets the same math.
    if constexpr (is_half_v<T> || std::is_same_v<T, float>) {
      float buf[kFloatBlock];
      for (int64_t i0 = 0; i0 < n; i0 += kFloatBlock) {
        const int64_t m = std::min(kFloatBlock, n - i0);
        load_floats<T>(p[1] + i0 * s[1], s[1], buf, m);
        unary_floats<OP>(buf, buf, m);
        store_floats<T>(p[0] + i0 * s[0], s[0], buf, m);
      }
    } else if (contiguous) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = T(unary_apply<OP>(A(x[i])));
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * s[0]) = T(unary_apply<OP>(A(*reinterpret_cast<const T*>(p[1] + i * s[1]))));
    }
  });
}

template <class T>
void unary_integral(UnaryOp op, const Tensor& out, const Tensor& in) {
  StridedLoop<2> loop({&out, &in});
  loop.run([&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      T x = *reinterpret_cast<const T*>(p[1] + i * s[1]);
      T r = x;
      if constexpr (!std::is_same_v<T, bool>) {
        using U = std::make_unsigned_t<T>;  // wrap like two's complement, never UB
        switch (op) {
          case UnaryOp::Neg: r = T(U(0) - U(x)); break;
          case UnaryOp::Abs: r = x < 0 ? T(U(0) - U(x)) : x; break;
          case UnaryOp::Square: r = T(U(x) * U(x)); break;
          case UnaryOp::Sign: r = T((x > 0) - (x < 0)); break;
          case UnaryOp::Relu: r = x > 0 ? x : T(0); break;
          default: break;
        }
      }
      *reinterpret_cast<T*>(p[0] + i * s[0]) = r;
    }
  });
}

template <class T, UnaryOp... OPS>
void unary_switch(UnaryOp op, const Tensor& out, const Tensor& in) {
  ((op == OPS ? unary_loop<T, OPS>(out, in) : void()), ...);
}

}  // namespace

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  dispatch(in.dtype(), "unary", [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      unary_integral<T>(op, out, in);
    } else {
      using enum UnaryOp;
      unary_switch<T, Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu, Square,
                   Reciprocal, Sign, Log1p, Expm1>(op, out, in);
    }
  });
}

}  // namespace mdl::cpu
