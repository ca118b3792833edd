// The f32 column loops of the CPU attention (cpu/attention.cpp), at one vector width: a tile's
// scores are held transposed, st (rows = keys) x (width = queries), one vector lane per query, so
// the softmax and its backward run down the keys with no horizontal sums. 16 floats on AVX-512F
// (with the avx512_vec_math switch on), 8 on AVX2 + FMA, else 4 (SSE2); width is a multiple of the
// vector width (the micro-kernel's panel widths are 16 and 32).
#pragma once
#include <cstdint>

namespace mdl::cpu {

struct AttentionLanes {
  int vector_width;
  // mx[i] = the max of column i of st (rows x width), NaN if any is NaN.
  void (*max)(const float* st, int64_t rows, int64_t width, float* mx);
  // st = e^(st - sub[i]) in place, column by column; sum[i] = column i's sum (sum may be null).
  void (*exp)(float* st, int64_t rows, int64_t width, const float* sub, float* sum);
  // st[j][i] *= by[i].
  void (*scale)(float* st, int64_t rows, int64_t width, const float* by);
  // The softmax's backward down the keys, p the probabilities and d = dP: D[i] = the sum over j of
  // p[j][i] * d[j][i], then d = p * (d - D) in place.
  void (*softmax_grad)(const float* p, float* d, int64_t rows, int64_t width, float* D);
};

// The widest the CPU runs for this width.
const AttentionLanes& attention_lanes(int64_t width);

// Each width, for tests: the AVX2 one needs has_avx2_fma(), the AVX-512 one has_avx512f().
const AttentionLanes& attention_lanes4();
const AttentionLanes& attention_lanes8();
const AttentionLanes& attention_lanes16();

}  // namespace mdl::cpu
