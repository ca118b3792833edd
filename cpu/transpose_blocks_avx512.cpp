// Transposed copies (cpu/transpose_blocks.h) in AVX-512F registers: 16 x 16 f32 blocks, and 16 x 32
// blocks of 16-bit elements widened to 32 bits for the same transpose. This file alone is compiled
// for AVX-512F (by pragma); transpose_blocks() returns it only where the CPU has it.
#include <cstdlib>

#include "cpu/transpose_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#define MDL_ISA_TARGET "avx512f"
#include "cpu/isa_target_begin.h"
#include <immintrin.h>

#include "cpu/transpose16_avx512.h"
#include "cpu/transpose_blocks_loop.h"

namespace mdl::cpu {

namespace {

template <bool Stream>
[[gnu::always_inline]] inline void store_line(char* p, __m512i v) {
  if constexpr (Stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
  else _mm512_storeu_si512(p, v);
}

// dst (16 rows, 16 f32), row stride ldd; src column k at s + k * lds.
template <bool Stream>
void run_f32(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds) {
  transpose_blocks_loop::walk<16, 16>(dst, src, R, C, ldd, lds, 4, [&](char* d, const char* s) {
    __m512 v[16];
    for (int k = 0; k < 16; ++k) v[k] = _mm512_loadu_ps(s + k * lds * 4);
    transpose16(v);
    for (int r = 0; r < 16; ++r) store_line<Stream>(d + r * ldd * 4, _mm512_castps_si512(v[r]));
  });
}

// dst (16 rows, 32 16-bit elements): two 16 x 16 halves, each widened to 32 bits, transposed and
// narrowed back, then joined into one 64-byte row.
template <bool Stream>
void run_u16(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds) {
  transpose_blocks_loop::walk<16, 32>(dst, src, R, C, ldd, lds, 2, [&](char* d, const char* s) {
    __m256i half[2][16];
    for (int h = 0; h < 2; ++h) {
      __m512 v[16];
      for (int k = 0; k < 16; ++k) {
        const __m256i col = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + (16 * h + k) * lds * 2));
        v[k] = _mm512_castsi512_ps(_mm512_cvtepu16_epi32(col));
      }
      transpose16(v);
      for (int r = 0; r < 16; ++r) half[h][r] = _mm512_cvtepi32_epi16(_mm512_castps_si512(v[r]));
    }
    for (int r = 0; r < 16; ++r)
      store_line<Stream>(d + r * ldd * 2, _mm512_inserti64x4(_mm512_castsi256_si512(half[0][r]), half[1][r], 1));
  });
}

void run(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds, int bytes, bool stream) {
  if (bytes == 4) (stream ? run_f32<true> : run_f32<false>)(dst, src, R, C, ldd, lds);
  else if (bytes == 2) (stream ? run_u16<true> : run_u16<false>)(dst, src, R, C, ldd, lds);
  else std::abort();  // sizes says which it takes
  if (stream) _mm_sfence();
}

}  // namespace

const TransposeBlocks& transpose_blocks_avx512() {
  static constexpr TransposeBlocks t{"avx512f", (1u << 1) | (1u << 2), run};
  return t;
}

}  // namespace mdl::cpu
#include "cpu/isa_target_end.h"
#else
namespace mdl::cpu {
const TransposeBlocks& transpose_blocks_avx512() { std::abort(); }  // has_avx512f() is false here
}  // namespace mdl::cpu
#endif
