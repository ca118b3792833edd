// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): four 32-bit
// words from a key (the seed) and a counter, the same function on the CPU (Generator, dropout)
// and the GPU (dropout.cu), so masks and draws agree bit for bit. Inline, so a loop over
// counters compiles into straight-line arithmetic.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define MDL_PHILOX_FN __host__ __device__ __forceinline__
#else
#define MDL_PHILOX_FN inline
#endif

namespace mdl {

struct PhiloxWords {
  uint32_t w[4];
};

MDL_PHILOX_FN PhiloxWords philox4x32_10(uint64_t seed, uint64_t counter, uint64_t subsequence = 0) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32);
  uint32_t c2 = uint32_t(subsequence), c3 = uint32_t(subsequence >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

}  // namespace mdl

#undef MDL_PHILOX_FN
