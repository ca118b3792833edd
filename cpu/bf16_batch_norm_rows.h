// bf16 batch norm's row loops (cpu/norm.cpp) over (n, c) rows of a (N, C, S) tensor, at one vector
// width: 16 floats on AVX-512F, 8 on AVX2 + FMA, else 4 (SSE2). Each call walks `rows` rows lying side
// by side, n values each, with a per-row parameter (a channel's centre or coefficients) at [r]: one
// call for a run of channels, so that rows of 16 or 64 values (ResNet's late stages) do not each pay
// for a call, and the walk is in memory order. Each loop reads its operands once,
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
  // Row r is a + r * n. out[r] = the sum of its n values.
  void (*sum)(const uint16_t* a, int64_t rows, int64_t n, double* out);
  // out[r] = the sum of (a - centre[r])^2 over row r.
  void (*squares)(const uint16_t* a, int64_t rows, int64_t n, const float* centre, double* out);
  // Over row r: out[2r] = the sum of g', out[2r + 1] = the sum of g' (x - centre[r]): g' = g, or with
  // `gate`, 0 where the forward's pre-activation of x under gate[r] (norm_math::pre_activation) is <= 0
  // (the ReLU's mask).
  void (*grad_sums)(const uint16_t* g, const uint16_t* x, int64_t rows, int64_t n, const float* centre,
                    const BnAffine* gate, double* out);
  // Row r: y = activate(pre_activation(x, k[r]) (+ res)): res null for none; relu as norm_math::activate<true>.
  void (*forward)(const uint16_t* x, const uint16_t* res, uint16_t* y, int64_t rows, int64_t n, const BnAffine* k,
                  bool relu);
  // Row r: gx = g' * p[r] + x * q[r] + s[r], g' as in grad_sums.
  void (*backward)(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t rows, int64_t n, const float* p,
                   const float* q, const float* s, const BnAffine* gate);
};

// The widest this CPU runs, or null with the wide_bf16_batch_norm switch off.
const Bf16BatchNormRows* bf16_batch_norm_rows();

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const Bf16BatchNormRows& bf16_batch_norm_rows4();
const Bf16BatchNormRows& bf16_batch_norm_rows8();
const Bf16BatchNormRows& bf16_batch_norm_rows16();

}  // namespace mdl::cpu
