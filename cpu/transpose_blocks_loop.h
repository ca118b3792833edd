// The walk shared by the per-instruction-set transposes (cpu/transpose_blocks.h), included inside
// their target regions: strips of BC destination columns, each walked down its rows BR at a time, so
// that each of the strip's source columns is read as one long run (which the prefetcher follows);
// then the right and bottom edges element by element.
#pragma once
#include <cstdint>
#include <cstring>

namespace mdl::cpu::transpose_blocks_loop {

// block(d, s) copies the BR x BC block whose top-left destination element is d and source element s.
template <int64_t BR, int64_t BC, class Block>
[[gnu::always_inline]] inline void walk(char* dst, const char* src, int64_t R, int64_t C, int64_t ldd, int64_t lds,
                                        int64_t E, Block block) {
  const int64_t Rf = R / BR * BR, Cf = C / BC * BC;
  for (int64_t c = 0; c < Cf; c += BC)
    for (int64_t r = 0; r < Rf; r += BR) block(dst + (r * ldd + c) * E, src + (r + c * lds) * E);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = r < Rf ? Cf : 0; c < C; ++c)
      std::memcpy(dst + (r * ldd + c) * E, src + (r + c * lds) * E, size_t(E));
}

}  // namespace mdl::cpu::transpose_blocks_loop
