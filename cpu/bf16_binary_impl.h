// The body of Bf16Binary (cpu/bf16_binary.h) on one GCC float vector type V, included by
// cpu/bf16_binary_avx2.cpp (8 floats) and cpu/bf16_binary_avx512.cpp (16) inside their target regions.
// Internal linkage, so each region keeps its own copy.
#pragma once
#include <cstdint>

#include "cpu/bf16_binary.h"
#include "cpu/bf16_vectors.h"

namespace mdl::cpu::bf16_binary_impl {

namespace {

using namespace bf16_vectors;

template <BinaryOp OP, class U>
[[gnu::always_inline]] inline U apply(U x, U y) {
  if constexpr (OP == BinaryOp::Add) return x + y;
  else if constexpr (OP == BinaryOp::Sub) return x - y;
  else if constexpr (OP == BinaryOp::Mul) return x * y;
  else return x / y;
}

// A1 / B1: a / b walks its values (stride 1), else repeats a[0] / b[0].
template <class V, BinaryOp OP, bool A1, bool B1>
void run_as(const uint16_t* a, const uint16_t* b, uint16_t* o, int64_t n) {
  if (n <= 0) return;
  const float a0 = load_bf16_1(a), b0 = load_bf16_1(b);
  V av, bv;  // a0 and b0 in every lane, copied: V{} + a0 would turn -0 into +0, and flush a subnormal
  for (int l = 0; l < kWidth<V>; ++l) av[l] = a0, bv[l] = b0;
  int64_t j = 0;
  for (; j + kWidth<V> <= n; j += kWidth<V>)
    store_bf16(o + j, apply<OP>(A1 ? load_bf16<V>(a + j) : av, B1 ? load_bf16<V>(b + j) : bv));
  for (; j < n; ++j) store_bf16_1(o + j, apply<OP>(A1 ? load_bf16_1(a + j) : a0, B1 ? load_bf16_1(b + j) : b0));
}

template <class V, BinaryOp OP>
void run_op(const uint16_t* a, int64_t sa, const uint16_t* b, int64_t sb, uint16_t* o, int64_t n) {
  if (sa && sb) run_as<V, OP, true, true>(a, b, o, n);
  else if (sa) run_as<V, OP, true, false>(a, b, o, n);
  else if (sb) run_as<V, OP, false, true>(a, b, o, n);
  else run_as<V, OP, false, false>(a, b, o, n);
}

template <class V>
void run(BinaryOp op, const uint16_t* a, int64_t sa, const uint16_t* b, int64_t sb, uint16_t* o, int64_t n) {
  switch (op) {
    case BinaryOp::Add: return run_op<V, BinaryOp::Add>(a, sa, b, sb, o, n);
    case BinaryOp::Sub: return run_op<V, BinaryOp::Sub>(a, sa, b, sb, o, n);
    case BinaryOp::Mul: return run_op<V, BinaryOp::Mul>(a, sa, b, sb, o, n);
    default: return run_op<V, BinaryOp::Div>(a, sa, b, sb, o, n);
  }
}

}  // namespace

template <class V>
constexpr Bf16Binary binary() {
  return {int(kWidth<V>), run<V>};
}

}  // namespace mdl::cpu::bf16_binary_impl
