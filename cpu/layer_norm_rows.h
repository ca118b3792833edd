// The f32 row loops of layer norm (cpu/norm.cpp: one group, one element per channel) over contiguous
// rows of C floats, at one vector width: 16 floats on AVX-512F, 8 on AVX2 + FMA, else 4 (SSE2).
// layer_norm_rows() picks the widest the CPU runs, or 4 with the wide_layer_norm switch off. A row's
// sums are float lanes over blocks of kLayerNormBlock elements, added in double; the order is the
// same whatever the thread count.
#pragma once
#include <cstdint>

namespace mdl::cpu {

struct LayerNormRows {
  int width;
  // mean and rstd = 1 / sqrt(var + eps) of a row x, and y = (x - mean) * rstd * w + b.
  void (*forward)(const float* x, float* y, int64_t C, const float* w, const float* b, double eps, float& mean,
                  float& rstd);
  // A row's input gradient: with h = g * w, gx = rstd * (h - mean(h) - xhat * mean(h * xhat)).
  void (*backward)(const float* x, const float* g, int64_t C, float mean, float rstd, const float* w, float* gx);
  // One row's share of the parameter gradients over n channels: sw[c] += g * xhat, sb[c] += g, in double.
  void (*param_grads)(const float* x, const float* g, int64_t n, float mean, float rstd, double* sw, double* sb);
};

constexpr int64_t kLayerNormBlock = 256;

const LayerNormRows& layer_norm_rows();

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const LayerNormRows& layer_norm_rows4();
const LayerNormRows& layer_norm_rows8();
const LayerNormRows& layer_norm_rows16();

}  // namespace mdl::cpu
