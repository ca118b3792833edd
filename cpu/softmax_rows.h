// The f32 row loops of softmax, log_softmax (cpu/softmax.cpp) and the fused softmax cross-entropy
// (cpu/loss.cpp) over contiguous rows, at one vector width: 16 floats on AVX-512F, 8 on AVX2 +
// FMA, else 4 (SSE2). softmax_rows() picks the widest the CPU runs, or 4 with the wide_softmax
// switch off.
#pragma once
#include <cstdint>

namespace mdl::cpu {

struct SoftmaxRows {
  int width;
  // The max of a contiguous row of C floats; NaN if any element is NaN.
  float (*max)(const float* p, int64_t C);
  // sum_c e^(p[c] - m) and sum_c (p[c] - m), folded into double every kSoftmaxBlock classes.
  void (*sums)(const float* p, int64_t C, float m, double& sum_exp, double& sum_x);
  // out[c] = g * (e^(p[c] - m - logsum) - off); out may be p.
  void (*grad)(float* out, const float* p, int64_t C, float m, float logsum, float g, float off);
  // y = softmax(x), or log_softmax(x) when log; y and x do not overlap.
  void (*forward)(const float* x, float* y, int64_t n, bool log);
  // gi = y * (g - sum(g * y)), or for log_softmax (y its output) g - e^y * sum(g).
  void (*backward)(const float* g, const float* y, float* gi, int64_t n, bool log);
};

constexpr int64_t kSoftmaxBlock = 1024;

const SoftmaxRows& softmax_rows();

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const SoftmaxRows& softmax_rows4();
const SoftmaxRows& softmax_rows8();
const SoftmaxRows& softmax_rows16();

}  // namespace mdl::cpu
