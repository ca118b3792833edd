// f32 GEMM in bf16 on AMX tiles (Sapphire Rapids and later): A and B are rounded to bf16 (nearest
// even) while they are packed, multiplied by TDPBF16PS with f32 accumulation, and C is updated in
// f32. One micro-kernel call computes a 32x32 block of C in four 16x16 f32 tiles (tmm0-3) from two
// A tiles (tmm4-5, 16 rows x 32 k each) and two B tiles (tmm6-7, 16 k-pairs x 16 columns x 2).
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

// 32 floats -> 32 bf16, rounded to nearest even (NaN stays NaN).
#define MDL_AMX_PACK_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx2")))

MDL_AMX_PACK_TARGET inline void to_bf16_32(const float* src, uint16_t* dst) {
  const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
  _mm512_storeu_si512(dst, (__m512i)v);
}

// Two rows of 16 floats -> 16 bf16 pairs (r0[j], r1[j]), the layout TDPBF16PS reads B in.
MDL_AMX_PACK_TARGET inline void interleave_bf16_16(const float* r0, const float* r1, uint16_t* dst) {
  const __m256i a = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(r0));
  const __m256i b = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(r1));
  const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);  // per 128-bit lane
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permute2x128_si256(lo, hi, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// A block (mc x kc) -> ceil(mc/32) panels, each ceil(kc/32) tiles of [32 rows][32 k] bf16, zero-padded.
MDL_AMX_PACK_TARGET void pack_a(int64_t mc, int64_t kc, const float* A, int64_t rsa, int64_t csa, uint16_t* out) {
  alignas(64) float row[KB];
  for (int64_t ir = 0; ir < mc; ir += MR)
    for (int64_t pb = 0; pb < kc; pb += KB)
      for (int64_t i = 0; i < MR; ++i, out += KB) {
        const int64_t kk = std::min(KB, kc - pb);
        if (ir + i >= mc) {
          std::fill(row, row + KB, 0.0f);
        } else {
          const float* a = A + (ir + i) * rsa + pb * csa;
          if (csa == 1 && kk == KB) {
            to_bf16_32(a, out);
            continue;
          }
          for (int64_t p = 0; p < KB; ++p) row[p] = p < kk ? a[p * csa] : 0.0f;
        }
        to_bf16_32(row, out);
      }
}

// B block (kc x nc) -> ceil(nc/32) panels, each ceil(kc/32) tiles of [16 k-pairs][32 columns][2] bf16.
MDL_AMX_PACK_TARGET void pack_b(int64_t kc, int64_t nc, const float* B, int64_t rsb, int64_t csb, uint16_t* out) {
  alignas(64) float r0[NR], r1[NR];
  auto gather = [&](int64_t p, int64_t jr, float* r) {  // row p of the panel at column jr, zero-padded
    const int64_t nr = std::min(NR, nc - jr);
    if (p >= kc) {
      std::fill(r, r + NR, 0.0f);
      return;
    }
    const float* b = B + p * rsb + jr * csb;
    if (csb == 1) {
      std::memcpy(r, b, size_t(nr) * sizeof(float));
      std::fill(r + nr, r + NR, 0.0f);
    } else {
      for (int64_t j = 0; j < NR; ++j) r[j] = j < nr ? b[j * csb] : 0.0f;
    }
  };
  for (int64_t jr = 0; jr < nc; jr += NR)
    for (int64_t p = 0; p < (kc + KB - 1) / KB * KB; p += 2, out += 2 * NR) {
      gather(p, jr, r0);
      gather(p + 1, jr, r1);
      interleave_bf16_16(r0, r1, out);
      interleave_bf16_16(r0 + 16, r1 + 16, out + 32);
    }
}

// t (32x32 f32, row stride 32) = a panel (nblk tiles) times b panel (nblk tiles).
__attribute__((target("amx-tile,amx-bf16"))) void kernel_32x32(int64_t nblk, const uint16_t* a, const uint16_t* b,
                                                               float* t) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < nblk; ++k, a += MR * KB, b += KB * NR) {
    _tile_loadd(4, a, 64);               // rows 0-15, k 0-31
    _tile_loadd(5, a + 16 * KB, 64);     // rows 16-31
    _tile_loadd(6, b, 4 * NR);           // columns 0-15: 16 pairs per row of 128 bytes
    _tile_loadd(7, b + 2 * 16, 4 * NR);  // columns 16-31
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, t, 4 * NR);
  _tile_stored(1, t + 16, 4 * NR);
  _tile_stored(2, t + 16 * NR, 4 * NR);
  _tile_stored(3, t + 16 * NR + 16, 4 * NR);
}


}  // namespace

bool amx_bf16_usable() {
  static const bool yes = [] {
    // CPUID leaf 7: subleaf 0 EDX bit 22 AMX-BF16, bit 24 AMX-TILE; subleaf 1 EAX bit 5 AVX512-BF16.
    unsigned a0, b0, c0, d0, a1, b1, c1, d1;
    if (!__get_cpuid_count(7, 0, &a0, &b0, &c0, &d0) || !__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) return false;
    const bool amx = (d0 >> 22 & 1) && (d0 >> 24 & 1), bf16 = a1 >> 5 & 1;
    __builtin_cpu_init();
    return amx && bf16 && __builtin_cpu_supports("avx512bw") && request_amx_state();
  }();
  return yes;
}

void configure_amx_tiles() { configure_tiles_once(); }

void gemm_serial_amx_bf16(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
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
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, abuf);
        for (int64_t jr = 0; jr < nc; jr += NR)
          for (int64_t ir = 0; ir < mc; ir += MR) {
            kernel_32x32(nblk, abuf + ir * nblk * KB, bbuf + jr * nblk * KB, t);
            const int64_t mr = std::min(MR, mc - ir), nr = std::min(NR, nc - jr);
            float* c = C + (ic + ir) * rsc + (jc + jr) * csc;
            for (int64_t i = 0; i < mr; ++i)
              for (int64_t j = 0; j < nr; ++j) {
                float& cij = c[i * rsc + j * csc];
                cij = beta_pc == 0.0f ? alpha * t[i * NR + j] : alpha * t[i * NR + j] + beta_pc * cij;
              }
          }
      }
    }
  }
}

}  // namespace mdl::cpu

#else  // not x86-64: no AMX

namespace mdl::cpu {
bool amx_bf16_usable() { return false; }
void configure_amx_tiles() {}
void gemm_serial_amx_bf16(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*, int64_t,
                          int64_t, float, float*, int64_t, int64_t) {}
}  // namespace mdl::cpu

#endif
