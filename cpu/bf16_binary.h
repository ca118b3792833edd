// bf16 add, subtract, multiply and divide in the registers (cpu/binary.cpp), at one vector width: 16
// floats on AVX-512F, 8 on AVX2 + FMA. Each operand is widened by a shift, the op runs in float and the
// result is rounded back to bf16 in the register (nearest even, NaN kept): the bits of the float-block
// path (cpu/float_block.h), which widens every block of 256 values into a buffer, computes there and
// narrows the buffer again, three more trips through memory for an op that does one add a value.
#pragma once
#include <cstdint>

#include "kernels/op_kinds.h"

namespace mdl::cpu {

struct Bf16Binary {
  int width;
  // o[i] = bf16(float(a[i * sa]) op float(b[i * sb])) for i < n; sa and sb 1, or 0 for an operand
  // broadcast from one value. op: one that bf16_binary_takes.
  void (*run)(BinaryOp op, const uint16_t* a, int64_t sa, const uint16_t* b, int64_t sb, uint16_t* o, int64_t n);
};

constexpr bool bf16_binary_takes(BinaryOp op) {
  return op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul || op == BinaryOp::Div;
}

// The widest this CPU runs, or null: no AVX2, or the wide_bf16_binary switch off.
const Bf16Binary* bf16_binary();

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const Bf16Binary& bf16_binary8();
const Bf16Binary& bf16_binary16();

}  // namespace mdl::cpu
