// The f32 row loops of the fused softmax cross-entropy (cpu/loss.cpp), at one vector width: 16
// floats on AVX-512F, 8 on AVX2 + FMA, else 4 (SSE2). loss_rows() picks the widest the CPU runs,
// or 4 with the wide_cross_entropy switch off.
#pragma once
#include <cstdint>

namespace mdl::cpu {

struct LossRows {
  int width;
  // The max of a contiguous row of C floats; NaN if any element is NaN.
  float (*max)(const float* p, int64_t C);
  // sum_c e^(p[c] - m) and sum_c p[c], folded into double every kLossBlock classes.
  void (*sums)(const float* p, int64_t C, float m, double& sum_exp, double& sum_x);
  // out[c] = g * (e^(p[c] - m - logsum) - off); out may be p.
  void (*grad)(float* out, const float* p, int64_t C, float m, float logsum, float g, float off);
};

constexpr int64_t kLossBlock = 1024;

const LossRows& loss_rows();

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const LossRows& loss_rows4();
const LossRows& loss_rows8();
const LossRows& loss_rows16();

}  // namespace mdl::cpu
