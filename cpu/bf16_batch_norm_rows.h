// bf16 batch norm's row loops (cpu/norm.cpp) over one (n, c) row of a (N, C, S) tensor, at one vector
// width: 16 floats on AVX-512F, 8 on AVX2 + FMA, else 4 (SSE2). Each loop reads its operands once,
// widening bf16 in the registers (a shift) and rounding its output to bf16 there (nearest even, NaN
// kept), where the float-block path copies every block through buffers in memory first. Sums run in
// float lanes within blocks of kBf16NormBlock values, each block's sum added in double; a block whose
// float sum is not finite (bf16 has f32's range: squares past 3.4e38) is summed again in double. The
// order is the same whatever the thread count; it depends on the width, and the wider ones fuse
// multiply-adds (bf16_batch_norm_rows_impl.h), so the last bits depend on the CPU.
#pragma once
#include <cstdint>

#include "kernels/norm_math.h"

namespace mdl::cpu {

constexpr int64_t kBf16NormBlock = 256;

using BnAffine = kernels::norm_math::Affine<float>;

struct Bf16BatchNormRows {
  int width;
  // The sum of a row's n values.
  double (*sum)(const uint16_t* a, int64_t n);
  // The sum of (a - centre)^2.
  double (*squares)(const uint16_t* a, int64_t n, float centre);
  // sums[0] += the sum of g', sums[1] += the sum of g' (x - centre): g' = g, or with `gate`, 0 where
  // the forward's pre-activation of x (norm_math::pre_activation) is <= 0 (the ReLU's mask).
  void (*grad_sums)(const uint16_t* g, const uint16_t* x, int64_t n, float centre, const BnAffine* gate, double* sums);
  // y = activate(pre_activation(x, k) (+ r)): r null for none; relu as norm_math::activate<true>.
  void (*forward)(const uint16_t* x, const uint16_t* r, uint16_t* y, int64_t n, const BnAffine* k, bool relu);
  // gx = g' * p + x * q + s, g' as in grad_sums.
  void (*backward)(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t n, float p, float q, float s,
                   const BnAffine* gate);
};

// The widest this CPU runs, or null with the wide_bf16_batch_norm switch off.
const Bf16BatchNormRows* bf16_batch_norm_rows();

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const Bf16BatchNormRows& bf16_batch_norm_rows4();
const Bf16BatchNormRows& bf16_batch_norm_rows8();
const Bf16BatchNormRows& bf16_batch_norm_rows16();

}  // namespace mdl::cpu
