// Elementwise binary ops with broadcasting (operands arrive expanded: stride 0 on broadcast
// dims), and with a host scalar (binary_scalar). Arithmetic runs in acc_t (f16/bf16 in blocks of
// floats); comparisons write bool. Integer division by zero is reported after the loop, never a SIGFPE.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/binary_math.h"
#include "kernels/convert.h"
#include "cpu/bf16_binary.h"
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "cpu/float_block.h"
#include "cpu/loops.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

namespace {

// A run of 16-bit operands: blocks of floats (float_block.h), the arithmetic in float, one rounding;
// bf16 arithmetic on contiguous or broadcast operands in the registers instead (bf16_binary.h).
template <class T, BinaryOp OP>
void binary_half_run(char* const* p, const int64_t* s, int64_t n) {
  if constexpr (std::is_same_v<T, BFloat16> && bf16_binary_takes(OP)) {
    constexpr int64_t e = sizeof(T);
    const Bf16Binary* k = bf16_binary();
    if (k && s[0] == e && (s[1] == e || s[1] == 0) && (s[2] == e || s[2] == 0)) {
      const auto bits = [](const char* q) { return reinterpret_cast<const uint16_t*>(q); };
      return k->run(OP, bits(p[1]), s[1] / e, bits(p[2]), s[2] / e, reinterpret_cast<uint16_t*>(p[0]), n);
    }
  }
  float x[kFloatBlock], y[kFloatBlock], r[kFloatBlock];
  bool unused = false;
  for (int64_t i0 = 0; i0 < n; i0 += kFloatBlock) {
    const int64_t m = std::min(kFloatBlock, n - i0);
    load_floats<T>(p[1] + i0 * s[1], s[1], x, m);
    load_floats<T>(p[2] + i0 * s[2], s[2], y, m);
    if constexpr (is_comparison(OP)) {
      char* o = p[0] + i0 * s[0];
      if (s[0] == 1) {
        for (int64_t i = 0; i < m; ++i) reinterpret_cast<bool*>(o)[i] = binary_apply<OP, float>(x[i], y[i], unused);
      } else {
        for (int64_t i = 0; i < m; ++i)
          *reinterpret_cast<bool*>(o + i * s[0]) = binary_apply<OP, float>(x[i], y[i], unused);
      }
    } else {
      for (int64_t i = 0; i < m; ++i) r[i] = binary_apply<OP, float>(x[i], y[i], unused);
      store_floats<T>(p[0] + i0 * s[0], s[0], r, m);
    }
  }
}

template <class T, BinaryOp OP>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b) {
  // bool arithmetic runs in int64 so that True + True is not UB-adjacent; the result is != 0.
  using A = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
  using O = std::conditional_t<is_comparison(OP), bool, T>;
  std::atomic<bool> any_bad{false};
  StridedLoop<3> loop({&out, &a, &b});
  loop.run([&](char* const* p, const int64_t* s, int64_t n) {
    if constexpr (is_half_v<T>) return binary_half_run<T, OP>(p, s, n);
    bool bad = false;
    O* o = reinterpret_cast<O*>(p[0]);
    const char* pa = p[1];
    const char* pb = p[2];
    auto out_at = [&](int64_t i, auto v) { *reinterpret_cast<O*>(p[0] + i * s[0]) = convert<O>(v); };
    if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
      const T* x = reinterpret_cast<const T*>(pa);
      const T* y = reinterpret_cast<const T*>(pb);
      for (int64_t i = 0; i < n; ++i) o[i] = convert<O>(binary_apply<OP, A>(A(x[i]), A(y[i]), bad));
    } else if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == 0) {
      const T* x = reinterpret_cast<const T*>(pa);
      const A y = A(*reinterpret_cast<const T*>(pb));
      for (int64_t i = 0; i < n; ++i) o[i] = convert<O>(binary_apply<OP, A>(A(x[i]), y, bad));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        A x = A(*reinterpret_cast<const T*>(pa + i * s[1]));
        A y = A(*reinterpret_cast<const T*>(pb + i * s[2]));
        out_at(i, binary_apply<OP, A>(x, y, bad));
      }
    }
    if (bad) any_bad.store(true, std::memory_order_relaxed);
  });
  if (any_bad.load()) {
    if (OP == BinaryOp::Pow)
      MDL_FAIL("pow: integers to negative integer powers are not allowed (dtype ", a.dtype(), ")");
    MDL_FAIL("div: integer division by zero (dtype ", a.dtype(), ")");
  }
}

template <class T, BinaryOp... OPS>
void binary_switch(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  ((op == OPS ? binary_loop<T, OPS>(out, a, b) : void()), ...);
}

}  // namespace

const Bf16Binary* bf16_binary() {
  if (!toggles::wide_bf16_binary()) return nullptr;
  if (has_avx512f()) return &bf16_binary16();
  if (has_avx2_fma()) return &bf16_binary8();
  return nullptr;
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch(a.dtype(), "binary", [&]<class T>() {
    using enum BinaryOp;
    binary_switch<T, Add, Sub, Mul, Div, Pow, Maximum, Minimum, ReluBackward, AddRelu, Eq, Ne, Lt, Le, Gt, Ge>(op, out,
                                                                                                               a, b);
  });
}

// s seen as a stride-0 operand of out's shape, through the same loops as binary.
void binary_scalar(BinaryOp op, const Tensor& out, const Tensor& x, const Tensor& s, bool scalar_left) {
  const Tensor se = make_view(s, out.shape(), Shape(out.shape().size(), 0), s.offset());
  if (scalar_left) binary(op, out, se, x);
  else binary(op, out, x, se);
}

}  // namespace mdl::cpu
