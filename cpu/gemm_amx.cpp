// GEMM in bf16 on AMX tiles (Sapphire Rapids and later), from f32 operands (rounded to bf16, nearest
// even, while they are packed) or from bf16 ones (packed as they are); TDPBF16PS accumulates in f32.
// One micro-kernel call computes a 32x32 block of C in four 16x16 f32 tiles (tmm0-3) from two A
// tiles (tmm4-5, 16 rows x 32 k each) and two B tiles (tmm6-7, 16 k-pairs x 16 columns x 2). Where
// C is f32 and contiguous, alpha is 1 and beta 0 or 1, the accumulators are loaded from and stored
// to C itself; other blocks go through a 32x32 buffer and an AVX-512 epilogue. Operands stored
// transposed (A column-major, B row-major in N) are packed from their contiguous runs.
// The process asks Linux for the AMX register state once (arch_prctl), each thread loads the tile
// configuration once. gemm.cpp threads it like the f32 kernels and picks it when allowed.
#include "cpu/gemm_amx.h"
#include "cpu/packing_scratch.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "tensor/error.h"

namespace mdl::cpu {

namespace {

constexpr int64_t MR = 32, NR = 32, KB = 32;  // C block per call; k per tile step
constexpr int64_t MC = 128, KC = 512, NC = 1024;

bool request_amx_state() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// The tile configuration (palette 1): tiles 0-7 of 16 rows of 64 bytes. A constant in memory:
// GCC 12 does not see that LDTILECFG reads its operand and drops stores into a local one.
struct alignas(64) TileConfig {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
constexpr TileConfig kTileConfig = {1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

__attribute__((target("amx-tile"))) void configure_tiles_once() {
  thread_local bool configured = false;
  if (configured) return;
  _tile_loadconfig(&kTileConfig);
  configured = true;
}

#define MDL_AMX_PACK_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl,avx2")))

inline uint32_t low_bits(int64_t n) { return n >= 32 ? ~0u : (1u << n) - 1; }  // 0 <= n

// n <= 32 values at stride cs -> 32 bf16, zero past n. f32 rounds to nearest even (NaN stays NaN).
MDL_AMX_PACK_TARGET inline void row_bf16(const float* src, int64_t cs, int64_t n, uint16_t* dst) {
  __m512 lo, hi;
  if (cs == 1) {
    const uint32_t m = low_bits(n);
    lo = _mm512_maskz_loadu_ps(__mmask16(m), src);
    hi = _mm512_maskz_loadu_ps(__mmask16(m >> 16), src + 16);
  } else {
    alignas(64) float row[KB];
    for (int64_t p = 0; p < KB; ++p) row[p] = p < n ? src[p * cs] : 0.0f;
    lo = _mm512_load_ps(row);
    hi = _mm512_load_ps(row + 16);
  }
  _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}
MDL_AMX_PACK_TARGET inline void row_bf16(const uint16_t* src, int64_t cs, int64_t n, uint16_t* dst) {
  if (cs == 1) {
    _mm512_storeu_si512(dst, _mm512_maskz_loadu_epi16(__mmask32(low_bits(n)), src));
    return;
  }
  for (int64_t p = 0; p < KB; ++p) dst[p] = p < n ? src[p * cs] : 0;
}

// r0, r1 (32 bf16 each) -> 32 pairs (r0[j], r1[j]), the layout TDPBF16PS reads B in: columns
// 0-15 to lo, 16-31 to hi.
MDL_AMX_PACK_TARGET inline void interleave_rows(const uint16_t* r0, const uint16_t* r1, uint16_t* lo_dst,
                                                uint16_t* hi_dst) {
  alignas(64) static constexpr uint16_t lo_index[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i a = _mm512_loadu_si512(r0), b = _mm512_loadu_si512(r1);
  const __m512i lo = _mm512_load_si512(lo_index), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  _mm512_storeu_si512(lo_dst, _mm512_permutex2var_epi16(a, lo, b));
  _mm512_storeu_si512(hi_dst, _mm512_permutex2var_epi16(a, hi, b));
}

// 32 x 32 bf16, row-major -> its transpose (one pass through the cache-resident tile).
inline void transpose_32x32(const uint16_t* src, uint16_t* dst) {
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t c = 0; c < 32; ++c) dst[c * 32 + r] = src[r * 32 + c];
}

// A block (mc x kc) -> ceil(mc/32) panels, each ceil(kc/32) tiles of [32 rows][32 k] bf16, zero-padded.
// Stored column-major (csa != 1, rsa == 1), each k's 32 rows are read as one run and the tile transposed.
template <class S>
MDL_AMX_PACK_TARGET void pack_a(int64_t mc, int64_t kc, const S* A, int64_t rsa, int64_t csa, uint16_t* out) {
  alignas(64) uint16_t cols[KB * MR];
  const bool by_columns = rsa == 1 && csa != 1;
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t mr = std::min(MR, mc - ir);
    for (int64_t pb = 0; pb < kc; pb += KB, out += MR * KB) {
      const int64_t kk = std::min(KB, kc - pb);
      const S* a = A + ir * rsa + pb * csa;
      if (by_columns) {
        for (int64_t p = 0; p < KB; ++p)
          if (p < kk) row_bf16(a + p * csa, 1, mr, cols + p * MR);
          else std::memset(cols + p * MR, 0, MR * sizeof(uint16_t));
        transpose_32x32(cols, out);
        continue;
      }
      for (int64_t i = 0; i < MR; ++i)
        if (i < mr) row_bf16(a + i * rsa, csa, kk, out + i * KB);
        else std::memset(out + i * KB, 0, KB * sizeof(uint16_t));
    }
  }
}

// B block (kc x nc) -> ceil(nc/32) panels, each ceil(kc/32) k-blocks of two tiles (columns 0-15,
// then 16-31), each [16 k-pairs][16 columns][2] bf16: 1 KiB that one tile load reads whole.
// Stored transposed (rsb == 1, csb != 1), each column's 32 k are read as one run: its 16 pairs are
// a row of the [32 columns][16 pairs] block that is transposed as 32-bit words.
template <class S>
MDL_AMX_PACK_TARGET void pack_b(int64_t kc, int64_t nc, const S* B, int64_t rsb, int64_t csb, uint16_t* out) {
  alignas(64) uint16_t r0[NR], r1[NR];
  alignas(64) uint32_t pairs[NR * KB / 2];
  const bool by_columns = rsb == 1 && csb != 1;
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t nr = std::min(NR, nc - jr);
    for (int64_t pb = 0; pb < kc; pb += KB) {
      const int64_t kk = std::min(KB, kc - pb);
      const S* b = B + pb * rsb + jr * csb;
      if (by_columns) {
        for (int64_t j = 0; j < NR; ++j)
          if (j < nr) row_bf16(b + j * csb, 1, kk, reinterpret_cast<uint16_t*>(pairs + j * KB / 2));
          else std::memset(pairs + j * KB / 2, 0, KB / 2 * sizeof(uint32_t));
        uint32_t* o = reinterpret_cast<uint32_t*>(out);  // [2 halves][16 pairs][16 columns]
        for (int64_t q = 0; q < KB / 2; ++q)
          for (int64_t j = 0; j < NR; ++j) o[(j / 16) * 256 + q * 16 + j % 16] = pairs[j * KB / 2 + q];
        out += KB * NR;
        continue;
      }
      for (int64_t p = 0; p < KB; p += 2) {
        if (p < kk) row_bf16(b + p * rsb, csb, nr, r0);
        else std::memset(r0, 0, sizeof r0);
        if (p + 1 < kk) row_bf16(b + (p + 1) * rsb, csb, nr, r1);
        else std::memset(r1, 0, sizeof r1);
        interleave_rows(r0, r1, out + p * 16, out + KB * 16 + p * 16);
      }
      out += KB * NR;
    }
  }
}

// c (32x32 f32, row stride ldc floats) = [c +] a panel (nblk tiles) times b panel (nblk tiles).
__attribute__((target("amx-tile,amx-bf16"))) void kernel_32x32(int64_t nblk, const uint16_t* a, const uint16_t* b,
                                                               float* c, int64_t ldc, bool accumulate) {
  const int64_t stride = ldc * int64_t(sizeof(float));
  if (accumulate) {
    _tile_loadd(0, c, stride);
    _tile_loadd(1, c + 16, stride);
    _tile_loadd(2, c + 16 * ldc, stride);
    _tile_loadd(3, c + 16 * ldc + 16, stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < nblk; ++k, a += MR * KB, b += KB * NR) {
    // B streams from L2 on every call: the k block after next (2 KiB, past the panel's end into
    // the next panel's start) is fetched into L1 ahead of its tile loads.
    for (int l = 0; l < 32; ++l) _mm_prefetch(reinterpret_cast<const char*>(b + 2 * KB * NR) + 64 * l, _MM_HINT_T0);
    _tile_loadd(4, a, 64);            // rows 0-15, k 0-31
    _tile_loadd(5, a + 16 * KB, 64);  // rows 16-31
    _tile_loadd(6, b, 64);            // columns 0-15: 16 pairs of 16 columns
    _tile_loadd(7, b + 16 * KB, 64);  // columns 16-31
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, stride);
  _tile_stored(1, c + 16, stride);
  _tile_stored(2, c + 16 * ldc, stride);
  _tile_stored(3, c + 16 * ldc + 16, stride);
}

// c (mr x nr of C) = alpha * t + beta * c, t the 32x32 block; beta == 0 ignores c (NaN included).
MDL_AMX_PACK_TARGET void update_c(const float* t, int64_t mr, int64_t nr, float alpha, float beta, float* c,
                                  int64_t rsc, int64_t csc) {
  if (csc != 1) {
    for (int64_t i = 0; i < mr; ++i)
      for (int64_t j = 0; j < nr; ++j) {
        float& cij = c[i * rsc + j * csc];
        cij = beta == 0.0f ? alpha * t[i * NR + j] : alpha * t[i * NR + j] + beta * cij;
      }
    return;
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; j += 16) {
      const __mmask16 m = __mmask16(low_bits(nr - j));
      float* cij = c + i * rsc + j;
      __m512 v = _mm512_mul_ps(va, _mm512_load_ps(t + i * NR + j));
      if (beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, cij)));
      _mm512_mask_storeu_ps(cij, m, v);
    }
}

template <class S>
void gemm_serial(int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t rsa, int64_t csa, const S* B,
                 int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  configure_tiles_once();
  const int64_t kc_max = (std::min(KC, K) + KB - 1) / KB * KB;
  uint16_t* abuf = packing_scratch<uint16_t>(0, kc_max * std::min(MC, (M + MR - 1) / MR * MR));
  uint16_t* bbuf = packing_scratch<uint16_t>(1, kc_max * std::min(NC, (N + NR - 1) / NR * NR));
  alignas(64) float t[MR * NR];
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc), nblk = (kc + KB - 1) / KB;
      pack_b(kc, nc, B + pc * rsb + jc * csb, rsb, csb, bbuf);
      const float beta_pc = pc == 0 ? beta : 1.0f;
      const bool in_place = csc == 1 && alpha == 1.0f && (beta_pc == 0.0f || beta_pc == 1.0f);
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, abuf);
        for (int64_t ir = 0; ir < mc; ir += MR)
          for (int64_t jr = 0; jr < nc; jr += NR) {
            const int64_t mr = std::min(MR, mc - ir), nr = std::min(NR, nc - jr);
            float* c = C + (ic + ir) * rsc + (jc + jr) * csc;
            const uint16_t *a = abuf + ir * nblk * KB, *b = bbuf + jr * nblk * KB;
            if (in_place && mr == MR && nr == NR) {
              kernel_32x32(nblk, a, b, c, rsc, beta_pc != 0.0f);
              continue;
            }
            kernel_32x32(nblk, a, b, t, NR, false);
            update_c(t, mr, nr, alpha, beta_pc, c, rsc, csc);
          }
      }
    }
  }
}

}  // namespace

bool amx_bf16_usable() {
  static const bool yes = [] {
    // CPUID leaf 7: subleaf 0 EDX bit 22 AMX-BF16, bit 24 AMX-TILE; subleaf 1 EAX bit 5 AVX512-BF16.
    unsigned a0, b0, c0, d0, a1, b1, c1, d1;
    if (!__get_cpuid_count(7, 0, &a0, &b0, &c0, &d0) || !__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) return false;
    const bool amx = (d0 >> 22 & 1) && (d0 >> 24 & 1), bf16 = a1 >> 5 & 1;
    __builtin_cpu_init();
    return amx && bf16 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           request_amx_state();
  }();
  return yes;
}

void configure_amx_tiles() { configure_tiles_once(); }

void gemm_serial_amx_bf16(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_serial(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

void gemm_serial_amx_bf16_bits(int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A, int64_t rsa,
                               int64_t csa, const uint16_t* B, int64_t rsb, int64_t csb, float beta, float* C,
                               int64_t rsc, int64_t csc) {
  gemm_serial(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
}

}  // namespace mdl::cpu

#else  // not x86-64: no AMX

namespace mdl::cpu {
bool amx_bf16_usable() { return false; }
void configure_amx_tiles() {}
void gemm_serial_amx_bf16(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*, int64_t,
                          int64_t, float, float*, int64_t, int64_t) {}
void gemm_serial_amx_bf16_bits(int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, int64_t, const uint16_t*,
                               int64_t, int64_t, float, float*, int64_t, int64_t) {}
}  // namespace mdl::cpu

#endif
