// Transposed copies in register blocks, one kernel per instruction set: a block of source columns is
// loaded as whole vectors (each a run down one column, contiguous in memory), transposed in registers
// and stored as whole vectors along the destination rows. cpu/copy.cpp's transposed_copy splits a
// matrix into panels of rows and calls one of these on each.
#pragma once
#include <cstdint>

namespace mdl::cpu {

struct TransposeBlocks {
  const char* isa;
  // Element sizes `run` takes (bit b set: 2^b bytes).
  unsigned sizes;
  // dst[r * ldd + c] = src[r + c * lds] for r < R, c < C, in elements of `bytes` bytes: full blocks in
  // registers, walking down each strip of block columns, and the edges one element at a time.
  // stream: non-temporal stores, each a whole 64-byte line (dst and ldd * bytes must be multiples of
  // 64: transpose_can_stream); they are fenced before run returns.
  void (*run)(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds, int bytes, bool stream);
};

// The widest this CPU runs (AVX-512F, then AVX2), or nullptr.
const TransposeBlocks* transpose_blocks();

// Each instruction set, for tests: the AVX-512 one needs has_avx512f(), the AVX2 one has_avx2_fma().
const TransposeBlocks& transpose_blocks_avx512();
const TransposeBlocks& transpose_blocks_avx2();

// A destination this large goes out through non-temporal stores: it cannot stay in cache for the
// next op anyway, and a store that skips the cache does not read the line it overwrites first.
constexpr int64_t kTransposeStreamBytes = int64_t(8) << 20;

inline bool transpose_can_stream(const void* dst, int64_t ldd, int bytes) {
  return reinterpret_cast<uintptr_t>(dst) % 64 == 0 && (ldd * bytes) % 64 == 0;
}

}  // namespace mdl::cpu
