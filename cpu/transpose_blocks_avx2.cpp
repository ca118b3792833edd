// Transposed copies (cpu/transpose_blocks.h) in AVX2 registers: f32 blocks of 8 rows x 16 columns,
// two 8 x 8 transposes whose rows join into one 64-byte line. This file alone is compiled for AVX2
// (by pragma); transpose_blocks() returns it only where the CPU has it and not AVX-512F.
#include <cstdlib>

#include "cpu/transpose_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx2"
#include "cpu/isa_target_begin.h"
#include <immintrin.h>

#include "cpu/transpose_blocks_loop.h"

namespace mdl::cpu {

namespace {

// v[k] = column k of an 8 x 8 block -> v[r] = row r: interleaves within 128-bit lanes, then the
// lanes swapped across.
[[gnu::always_inline]] inline void transpose8(__m256 v[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    v[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

template <bool Stream>
[[gnu::always_inline]] inline void store8(char* p, __m256 v) {
  if constexpr (Stream) _mm256_stream_ps(reinterpret_cast<float*>(p), v);
  else _mm256_storeu_ps(reinterpret_cast<float*>(p), v);
}

// dst (8 rows, 16 f32), row stride ldd; src column k at s + k * lds.
template <bool Stream>
void run_f32(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds) {
  transpose_blocks_loop::walk<8, 16>(dst, src, R, C, ldd, lds, 4, [&](char* d, const char* s) {
    __m256 left[8], right[8];
    for (int k = 0; k < 8; ++k) {
      left[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + k * lds * 4));
      right[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + (8 + k) * lds * 4));
    }
    transpose8(left);
    transpose8(right);
    for (int r = 0; r < 8; ++r) {
      store8<Stream>(d + r * ldd * 4, left[r]);
      store8<Stream>(d + r * ldd * 4 + 32, right[r]);
    }
  });
}

void run(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds, int bytes, bool stream) {
  if (bytes != 4) std::abort();  // sizes says which it takes
  (stream ? run_f32<true> : run_f32<false>)(dst, src, R, C, ldd, lds);
  if (stream) _mm_sfence();
}

}  // namespace

const TransposeBlocks& transpose_blocks_avx2() {
  static constexpr TransposeBlocks t{"avx2", 1u << 2, run};
  return t;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const TransposeBlocks& transpose_blocks_avx2() { std::abort(); }  // has_avx2_fma() is false here
}  // namespace mdl::cpu
#endif
