// The GEMM driver after BLIS/GotoBLAS: the jc/pc/ic loops cut C into NC x KC x MC blocks sized for
// L3/L1/L2, pack A and B into zero-padded micro-panels (any strides), and run an MR x NR
// micro-kernel over each tile; OpenMP gives each thread one slab of C. The f32 micro-kernel (and
// with it MR, NR and the block sizes) is chosen per call from what the CPU has.
#include "cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <type_traits>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/gemm_amx.h"
#include "cpu/gemm_bf16_dot.h"
#include "cpu/packing_scratch.h"
#include "cpu/transpose_blocks.h"
#include "tensor/error.h"
#include "tensor/float_mode.h"
#include "tensor/half.h"
#include "tensor/parallel.h"
#include "switches/list/toggles.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mdl::cpu {

namespace detail {
void sgemm_kernel_6x16_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t rsc, int64_t csc, float alpha,
                            float beta);
void sgemm_kernel_12x32_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t rsc, int64_t csc,
                               float alpha, float beta);
}  // namespace detail

namespace {

template <class T>
using Kernel = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t rsc, int64_t csc, T alpha, T beta);

// A micro-kernel's tile (MR x NR) and the block sizes the driver cuts the problem into around it:
// a KC x NR B micro-panel stays in L1, an MC x KC A block in L2, a KC x NC B block in L3.
template <class T_, int64_t MR_, int64_t NR_, int64_t MC_, int64_t KC_, int64_t NC_>
struct Blocking {
  using T = T_;
  static constexpr int64_t MR = MR_, NR = NR_, MC = MC_, KC = KC_, NC = NC_;
};
// f32 on AVX2 (and the scalar fallback): a 6x16 tile fills 12 of 16 ymm registers; B micro-panel
// 16 KiB, A block 144 KiB, B block 4 MiB.
using Blocking6x16 = Blocking<float, 6, 16, 144, 256, 4080>;
// f32 on AVX-512: a 12x32 tile fills 24 of 32 zmm registers; B micro-panel 24 KiB (of a 48 KiB
// L1), A block 180 KiB, B block 3 MiB.
using Blocking12x32 = Blocking<float, 12, 32, 240, 192, 4096>;
using BlockingF64 = Blocking<double, 4, 8, 96, 256, 2048>;

// The portable micro-kernel, same contract as the SIMD ones: a is kc x MR, b is kc x NR, packed.
template <class T, int64_t MR, int64_t NR>
void kernel_scalar(int64_t kc, const T* a, const T* b, T* c, int64_t rsc, int64_t csc, T alpha, T beta) {
  T acc[MR][NR] = {};
  for (int64_t p = 0; p < kc; ++p, a += MR, b += NR)
    for (int64_t i = 0; i < MR; ++i)
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += a[i] * b[j];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t j = 0; j < NR; ++j) {
      T& cij = c[i * rsc + j * csc];
      cij = beta == T(0) ? alpha * acc[i][j] : alpha * acc[i][j] + beta * cij;
    }
}
std::atomic<int> g_forced_kernel{-1};  // a GemmKernel, or -1: the best one allowed


// A block (mc x kc) -> ceil(mc/MR) panels, each kc x MR (buf[p*MR + i]), short panels zero-padded.
// S: the operands' element type, T or bf16 (widened to T exactly as it is packed).
template <class T, int64_t MR, class S>
void pack_a(int64_t mc, int64_t kc, const S* A, int64_t rsa, int64_t csa, T* buf) {
  for (int64_t ir = 0; ir < mc; ir += MR, buf += kc * MR) {
    const int64_t mr = std::min(MR, mc - ir);
    const S* a = A + ir * rsa;
    if (mr == MR && csa == 1) {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < MR; ++i) buf[p * MR + i] = T(a[i * rsa + p]);
    } else if (mr == MR && rsa == 1) {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < MR; ++i) buf[p * MR + i] = T(a[p * csa + i]);
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < MR; ++i) buf[p * MR + i] = i < mr ? T(a[i * rsa + p * csa]) : T(0);
    }
  }
}

// One B panel (kc x nr, nr <= NR) -> kc x NR (buf[p*NR + j]), zero-padded. A panel of f32 stored
// transposed (rsb == 1: B = W^T, as in x @ W^T) is a kc x NR transpose, done in register blocks when
// `vector` is given (gemm_vector_pack).
template <class T, int64_t NR, class S>
void pack_b_panel(int64_t kc, int64_t nr, const S* b, int64_t rsb, int64_t csb, T* buf, const TransposeBlocks* vector) {
  if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>)
    if (vector && nr == NR && rsb == 1 && csb != 1)
      return vector->run(reinterpret_cast<char*>(buf), reinterpret_cast<const char*>(b), kc, NR, NR, csb,
                         int(sizeof(float)), false);
  if (nr == NR && csb == 1) {
    for (int64_t p = 0; p < kc; ++p) {
      if constexpr (std::is_same_v<S, T>) std::memcpy(buf + p * NR, b + p * rsb, NR * sizeof(T));
      else
        for (int64_t j = 0; j < NR; ++j) buf[p * NR + j] = T(b[p * rsb + j]);
    }
  } else if (nr == NR && rsb == 1) {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j = 0; j < NR; ++j) buf[p * NR + j] = T(b[j * csb + p]);
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j = 0; j < NR; ++j) buf[p * NR + j] = j < nr ? T(b[j * csb + p * rsb]) : T(0);
  }
}

// C block (mc x nc) = alpha * packed A @ packed B + beta * C, one micro-tile at a time. A's
// micro-panels lie a_panel floats apart and B's b_panel (kc * MR and kc * NR, unless the operand was
// packed for a longer k: PackedA, PackedB).
// Edge tiles go through a full-size scratch tile so the kernel never sees a short one.
template <class Bk, class T = typename Bk::T>
void macro_kernel(int64_t mc, int64_t nc, int64_t kc, T alpha, const T* a, int64_t a_panel, const T* b, int64_t b_panel,
                  T beta, T* C, int64_t rsc, int64_t csc, Kernel<T> kernel) {
  constexpr int64_t MR = Bk::MR, NR = Bk::NR;
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t nr = std::min(NR, nc - jr);
    const T* bp = b + jr / NR * b_panel;
    for (int64_t ir = 0; ir < mc; ir += MR) {
      const int64_t mr = std::min(MR, mc - ir);
      T* c = C + ir * rsc + jr * csc;
      if (mr == MR && nr == NR) {
        kernel(kc, a + ir / MR * a_panel, bp, c, rsc, csc, alpha, beta);
        continue;
      }
      alignas(64) T t[MR * NR];
      kernel(kc, a + ir / MR * a_panel, bp, t, NR, 1, alpha, T(0));
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) {
          T& cij = c[i * rsc + j * csc];
          cij = beta == T(0) ? t[i * NR + j] : t[i * NR + j] + beta * cij;
        }
    }
  }
}

// One thread's GEMM over the whole (sub)problem; M, N, K > 0.
template <class Bk, class S, class T = typename Bk::T>
void gemm_serial(int64_t M, int64_t N, int64_t K, T alpha, const S* A, int64_t rsa, int64_t csa, const S* B,
                 int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc, Kernel<T> kernel) {
  const int64_t kc_max = std::min(Bk::KC, K);
  T* abuf = packing_scratch<T>(0, kc_max * std::min(Bk::MC, (M + Bk::MR - 1) / Bk::MR * Bk::MR));
  T* bbuf = packing_scratch<T>(1, kc_max * std::min(Bk::NC, (N + Bk::NR - 1) / Bk::NR * Bk::NR));
  const TransposeBlocks* vector_pack = toggles::gemm_vector_pack() ? transpose_blocks() : nullptr;
  for (int64_t jc = 0; jc < N; jc += Bk::NC) {
    const int64_t nc = std::min(Bk::NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += Bk::KC) {
      const int64_t kc = std::min(Bk::KC, K - pc);
      for (int64_t jr = 0; jr < nc; jr += Bk::NR)
        pack_b_panel<T, Bk::NR>(kc, std::min(Bk::NR, nc - jr), B + pc * rsb + (jc + jr) * csb, rsb, csb, bbuf + jr * kc,
                                vector_pack);
      const T beta_pc = pc == 0 ? beta : T(1);
      for (int64_t ic = 0; ic < M; ic += Bk::MC) {
        const int64_t mc = std::min(Bk::MC, M - ic);
        pack_a<T, Bk::MR>(mc, kc, A + ic * rsa + pc * csa, rsa, csa, abuf);
        macro_kernel<Bk>(mc, nc, kc, alpha, abuf, kc * Bk::MR, bbuf, kc * Bk::NR, beta_pc, C + ic * rsc + jc * csc, rsc,
                         csc, kernel);
      }
    }
  }
}

// Below this many multiply-adds a second thread costs more to wake than it saves.
constexpr int64_t kParallelMinMacs = int64_t(1) << 19;

int threads_for(int64_t M, int64_t N, int64_t K) {
#ifdef _OPENMP
  if (omp_in_parallel() || M * N * K < kParallelMinMacs) return 1;
  return omp_get_max_threads();
#else
  (void)M, (void)N, (void)K;
  return 1;
#endif
}

// C = beta * C without reading C when beta == 0.
template <class T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t rsc, int64_t csc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T& cij = C[i * rsc + j * csc];
      cij = beta == T(0) ? T(0) : beta * cij;
    }
}

// One thread's GEMM over a (sub)problem, and the tile (MR x NR) it cuts C into: what gemm_any
// threads. M, N, K > 0. S: the operands' element type, T or bf16.
template <class T, class S = T>
using SerialGemm = void (*)(int64_t M, int64_t N, int64_t K, T alpha, const S* A, int64_t rsa, int64_t csa, const S* B,
                            int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc);
template <class T, class S = T>
struct Path {
  int64_t MR, NR;
  SerialGemm<T, S> serial;
};

template <class Bk, Kernel<typename Bk::T> kernel, class S, class T = typename Bk::T>
void serial_packed(int64_t M, int64_t N, int64_t K, T alpha, const S* A, int64_t rsa, int64_t csa, const S* B,
                   int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc) {
  gemm_serial<Bk>(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, kernel);
}

template <class Bk, Kernel<typename Bk::T> kernel, class S = typename Bk::T>
constexpr Path<typename Bk::T, S> packed_path() {
  return {Bk::MR, Bk::NR, serial_packed<Bk, kernel, S>};
}

// bf16 operands as the pair kernels take them: their bits.
using Bf16Dot = void (*)(int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t,
                         int64_t, float, float*, int64_t, int64_t);
template <Bf16Dot serial>
void serial_bf16_bits(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t rsa, int64_t csa,
                      const BFloat16* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  static_assert(sizeof(BFloat16) == sizeof(uint16_t));
  serial(M, N, K, alpha, reinterpret_cast<const uint16_t*>(A), rsa, csa, reinterpret_cast<const uint16_t*>(B), rsb, csb,
         beta, C, rsc, csc);
}

// The path of the f32 micro-kernel `k`.
Path<float> f32_path(GemmKernel k) {
  switch (k) {
#if defined(__x86_64__) || defined(__i386__)
    case GemmKernel::avx512: return packed_path<Blocking12x32, detail::sgemm_kernel_12x32_avx512>();
    case GemmKernel::avx2: return packed_path<Blocking6x16, detail::sgemm_kernel_6x16_avx2>();
#endif
    case GemmKernel::amx_bf16: return {32, 32, gemm_serial_amx_bf16};
    case GemmKernel::avx512_bf16: return {12, 32, gemm_serial_bf16_dot};
    case GemmKernel::avx512_bf16_emulated: return {12, 32, gemm_serial_bf16_dot_emulated};
    default: return packed_path<Blocking6x16, kernel_scalar<float, 6, 16>>();
  }
}

// The path of kernel `k` for bf16 operands: packed straight from bf16.
Path<float, BFloat16> bf16_path(GemmKernel k) {
  switch (k) {
#if defined(__x86_64__) || defined(__i386__)
    case GemmKernel::avx512: return packed_path<Blocking12x32, detail::sgemm_kernel_12x32_avx512, BFloat16>();
    case GemmKernel::avx2: return packed_path<Blocking6x16, detail::sgemm_kernel_6x16_avx2, BFloat16>();
#endif
    case GemmKernel::amx_bf16: return {32, 32, serial_bf16_bits<gemm_serial_amx_bf16_bits>};
    case GemmKernel::avx512_bf16: return {12, 32, serial_bf16_bits<gemm_serial_bf16_dot>};
    case GemmKernel::avx512_bf16_emulated: return {12, 32, serial_bf16_bits<gemm_serial_bf16_dot_emulated>};
    default: return packed_path<Blocking6x16, kernel_scalar<float, 6, 16>, BFloat16>();
  }
}

// Cuts C into one slab of whole micro-tiles per thread, along N when N is the wider side, else M;
// each thread runs the serial loops on its slab with its own packing buffers. One barrier per call:
// a shared packed B would need two per KC step, and measured slower here whenever another process
// takes a core. Redundant packing (A twice, or B twice) costs a few percent. A tile is computed
// the same way on any thread, so results never depend on the thread count. M, N, K > 0.
// Runs slab(lo, hi, split_n) on nt threads, each a slab of whole micro-tiles of C: columns [lo, hi)
// when split_n, else rows. An exception on a thread comes back out on the caller's.
template <class F>
void for_each_slab(int nt, int64_t M, int64_t N, int64_t MR, int64_t NR, const F& slab) {
  const bool split_n = N >= M;
  const int64_t unit = split_n ? NR : MR, extent = split_n ? N : M;
  const int64_t tiles = (extent + unit - 1) / unit;
  std::exception_ptr error;
#pragma omp parallel num_threads(nt)
  {
    sync_float_mode();
#ifdef _OPENMP
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
#else
    const int64_t t = 0, team = 1;
    (void)nt;
#endif
    const int64_t lo = std::min(extent, tiles * t / team * unit);
    const int64_t hi = std::min(extent, tiles * (t + 1) / team * unit);
    try {
      if (hi > lo) slab(lo, hi, split_n);
    } catch (...) {  // a failed scratch allocation must not escape the parallel region
#pragma omp critical(mdl_gemm_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

template <class T, class S>
void gemm_parallel(int nt, int64_t M, int64_t N, int64_t K, T alpha, const S* A, int64_t rsa, int64_t csa, const S* B,
                   int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc, const Path<T, S>& path) {
  for_each_slab(nt, M, N, path.MR, path.NR, [&](int64_t lo, int64_t hi, bool split_n) {
    if (split_n) path.serial(M, hi - lo, K, alpha, A, rsa, csa, B + lo * csb, rsb, csb, beta, C + lo * csc, rsc, csc);
    else path.serial(hi - lo, N, K, alpha, A + lo * rsa, rsa, csa, B, rsb, csb, beta, C + lo * rsc, rsc, csc);
  });
}

template <class T, class S>
void gemm_any(const char* name, int64_t M, int64_t N, int64_t K, T alpha, const S* A, int64_t rsa, int64_t csa,
              const S* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc, const Path<T, S>& path) {
  MDL_CHECK(M >= 0 && N >= 0 && K >= 0, name, ": negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) return scale_c(M, N, beta, C, rsc, csc);
  sync_float_mode();
  const int nt = threads_for(M, N, K);
  if (nt <= 1) return path.serial(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
  gemm_parallel(nt, M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, path);
}

// ---- Operands packed once (PackedA, PackedB) -----------------------------------------------------------
// A packed operand is every KC step's block at once: the rows [pc, pc + kb) of B (kb = min(KC, K - pc))
// start at pc * Npad (Npad: N rounded up to NR), as kb x NR micro-panels; the columns [pc, pc + kb) of
// A start at pc * Mpad, as kb x MR micro-panels. Packed for bf16 products, the same on bf16 pairs
// (cpu/gemm_bf16_dot_packed_impl.h).

constexpr int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// A with contiguous rows (csa == 1) is first transposed whole in register blocks (gemm_vector_pack), so
// each micro-panel then copies runs of MR contiguous values instead of gathering one value per row.
void transpose_rows_for_packing(int64_t M, int64_t K, int64_t MR, const float*& A, int64_t& rsa, int64_t& csa) {
  const TransposeBlocks* vector_pack = toggles::gemm_vector_pack() ? transpose_blocks() : nullptr;
  if (vector_pack && csa == 1 && rsa != 1 && M >= MR) {
    float* at = packing_scratch<float>(1, K * M);  // at (K x M) = A^T
    vector_pack->run(reinterpret_cast<char*>(at), reinterpret_cast<const char*>(A), K, M, M, rsa, int(sizeof(float)),
                     false);
    A = at, rsa = 1, csa = M;
  }
}

template <class Bk>
void pack_a_whole(int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa, void* out) {
  float* buf = static_cast<float*>(out);
  const int64_t mpad = round_up(M, Bk::MR);
  transpose_rows_for_packing(M, K, Bk::MR, A, rsa, csa);
  for (int64_t pc = 0; pc < K; pc += Bk::KC)
    pack_a<float, Bk::MR>(M, std::min(Bk::KC, K - pc), A + pc * csa, rsa, csa, buf + pc * mpad);
}

template <class Bk>
void pack_b_whole(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, void* out) {
  float* buf = static_cast<float*>(out);
  const int64_t npad = round_up(N, Bk::NR);
  const TransposeBlocks* vector_pack = toggles::gemm_vector_pack() ? transpose_blocks() : nullptr;
  for (int64_t pc = 0; pc < K; pc += Bk::KC) {
    const int64_t kb = std::min(Bk::KC, K - pc);
    for (int64_t jr = 0; jr < N; jr += Bk::NR)
      pack_b_panel<float, Bk::NR>(kb, std::min(Bk::NR, N - jr), B + pc * rsb + jr * csb, rsb, csb,
                                  buf + pc * npad + jr * kb, vector_pack);
  }
}

// C (m x n) = alpha * packed A (M x K)[:m, :k] @ panel (k x n, n <= NR) + beta * C; m, n, k > 0.
template <class Bk, Kernel<float> kernel>
void times_panel_packed(const void* packed_a, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* panel, float beta, float* C, int64_t rsc, int64_t csc) {
  const float* packed = static_cast<const float*>(packed_a);
  const int64_t mpad = round_up(M, Bk::MR);
  for (int64_t pc = 0; pc < k; pc += Bk::KC) {
    const int64_t kc = std::min(Bk::KC, k - pc), kb = std::min(Bk::KC, K - pc);
    macro_kernel<Bk>(m, n, kc, alpha, packed + pc * mpad, kb * Bk::MR, panel + pc * Bk::NR, kc * Bk::NR,
                     pc == 0 ? beta : 1.0f, C, rsc, csc, kernel);
  }
}

// C (M x n) = alpha * A (M x k) @ packed B (K x N)[:k, :n] + beta * C; M, n, k > 0.
template <class Bk, Kernel<float> kernel>
void times_packed_b(const void* packed_b, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                    const float* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc) {
  const float* packed = static_cast<const float*>(packed_b);
  const int64_t npad = round_up(N, Bk::NR);
  float* abuf = packing_scratch<float>(0, std::min(Bk::KC, k) * std::min(Bk::MC, round_up(M, Bk::MR)));
  for (int64_t pc = 0; pc < k; pc += Bk::KC) {
    const int64_t kc = std::min(Bk::KC, k - pc), kb = std::min(Bk::KC, K - pc);
    for (int64_t ic = 0; ic < M; ic += Bk::MC) {
      const int64_t mc = std::min(Bk::MC, M - ic);
      pack_a<float, Bk::MR>(mc, kc, A + ic * rsa + pc * csa, rsa, csa, abuf);
      macro_kernel<Bk>(mc, n, kc, alpha, abuf, kc * Bk::MR, packed + pc * npad, kb * Bk::NR, pc == 0 ? beta : 1.0f,
                       C + ic * rsc, rsc, csc, kernel);
    }
  }
}

}  // namespace

// A layout's element is 4 bytes: a float, or a pair of bf16 (k_per_element 2).
struct PackedOperand::Layout {
  int64_t MR, NR, k_per_element;
  void (*pack_a)(int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa, void* buf);
  void (*pack_b)(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, void* buf);
  void (*times_panel)(const void* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* panel, float beta, float* C, int64_t rsc, int64_t csc);
  void (*times_b)(const void* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc);
  // The same three with bf16 operands (bits), which the pair layout pairs as they are; null in the f32
  // layouts, where PackedA and PackedB widen them first (exactly).
  void (*pack_a16)(int64_t M, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa, void* buf);
  void (*times_panel16)(const void* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k, float alpha,
                        const uint16_t* panel, float beta, float* C, int64_t rsc, int64_t csc);
  void (*times_b16)(const void* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                    const uint16_t* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc);
};

namespace {

template <class Bk, Kernel<float> kernel>
constexpr PackedOperand::Layout packed_layout() {
  return {Bk::MR,
          Bk::NR,
          1,
          pack_a_whole<Bk>,
          pack_b_whole<Bk>,
          times_panel_packed<Bk, kernel>,
          times_packed_b<Bk, kernel>,
          nullptr,
          nullptr,
          nullptr};
}

// The pair kernel's layout (cpu/gemm_bf16_dot_packed_impl.h) on VDPBF16PS or its emulation. The products
// are generic lambdas: each fills the float slot and the bf16 (uint16_t) one, whose functions share names.
template <bool kEmulated>
constexpr PackedOperand::Layout pairs_layout() {
  constexpr auto times_panel = [](const void* packed, int64_t M, int64_t K, int64_t m, int64_t n, int64_t k,
                                  float alpha, const auto* panel, float beta, float* C, int64_t rsc, int64_t csc) {
    const auto* p = static_cast<const uint32_t*>(packed);
    if constexpr (kEmulated) times_panel_pairs_emulated(p, M, K, m, n, k, alpha, panel, beta, C, rsc, csc);
    else times_panel_pairs(p, M, K, m, n, k, alpha, panel, beta, C, rsc, csc);
  };
  constexpr auto times_b = [](const void* packed, int64_t K, int64_t N, int64_t M, int64_t n, int64_t k, float alpha,
                              const auto* A, int64_t rsa, int64_t csa, float beta, float* C, int64_t rsc, int64_t csc) {
    const auto* p = static_cast<const uint32_t*>(packed);
    if constexpr (kEmulated) times_pairs_b_emulated(p, K, N, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
    else times_pairs_b(p, K, N, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
  };
  return {12,
          32,
          2,
          [](int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa, void* buf) {
            transpose_rows_for_packing(M, K, 12, A, rsa, csa);
            pack_a_pairs(M, K, A, rsa, csa, static_cast<uint32_t*>(buf));
          },
          [](int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, void* buf) {
            pack_b_pairs(K, N, B, rsb, csb, static_cast<uint32_t*>(buf));
          },
          times_panel,
          times_b,
          [](int64_t M, int64_t K, const uint16_t* A, int64_t rsa, int64_t csa, void* buf) {
            pack_a_pairs(M, K, A, rsa, csa, static_cast<uint32_t*>(buf));
          },
          times_panel,
          times_b};
}

// The pair kernel's layout where bf16 products may use it (gemm.h), else null.
const PackedOperand::Layout* pairs_layout_now() {
  static constexpr PackedOperand::Layout native = pairs_layout<false>();
  static constexpr PackedOperand::Layout emulated = pairs_layout<true>();
  switch (gemm_bf16_values_kernel()) {
    case GemmKernel::avx512_bf16_emulated: return &emulated;
    case GemmKernel::avx512_bf16: return &native;
    case GemmKernel::amx_bf16: return toggles::avx512_bf16_dot() && has_avx512_bf16() ? &native : nullptr;
    default: return nullptr;
  }
}

// The layout products of this precision get now: for f32, gemm_f32's kernel, or where that is a bf16
// one, the CPU's widest f32 one; for bf16, the pair kernel's where it applies, else f32's.
const PackedOperand::Layout& packed_layout_now(GemmPrecision precision) {
  if (precision == GemmPrecision::bf16)
    if (const PackedOperand::Layout* pairs = pairs_layout_now()) return *pairs;
#if defined(__x86_64__) || defined(__i386__)
  static constexpr PackedOperand::Layout avx512 = packed_layout<Blocking12x32, detail::sgemm_kernel_12x32_avx512>();
  static constexpr PackedOperand::Layout avx2 = packed_layout<Blocking6x16, detail::sgemm_kernel_6x16_avx2>();
#endif
  static constexpr PackedOperand::Layout scalar = packed_layout<Blocking6x16, kernel_scalar<float, 6, 16>>();
  GemmKernel k = gemm_f32_kernel();
  if (gemm_kernel_rounds_to_bf16(k))
    k = has_avx512f() ? GemmKernel::avx512 : has_avx2_fma() ? GemmKernel::avx2 : GemmKernel::scalar;
  switch (k) {
#if defined(__x86_64__) || defined(__i386__)
    case GemmKernel::avx512: return avx512;
    case GemmKernel::avx2: return avx2;
#endif
    default: return scalar;
  }
}

}  // namespace

bool gemm_kernel_available(GemmKernel k) {
  switch (k) {
    case GemmKernel::scalar: return true;
    case GemmKernel::avx2: return has_avx2_fma();
    case GemmKernel::avx512: return has_avx512f();
    case GemmKernel::amx_bf16: return amx_bf16_usable();
    case GemmKernel::avx512_bf16: return has_avx512_bf16();
    case GemmKernel::avx512_bf16_emulated: return has_avx512f();
  }
  return false;
}

const char* gemm_kernel_name(GemmKernel k) {
  switch (k) {
    case GemmKernel::scalar: return "scalar 6x16";
    case GemmKernel::avx2: return "avx2-fma 6x16";
    case GemmKernel::avx512: return "avx512f 12x32";
    case GemmKernel::amx_bf16: return "amx-bf16 32x32";
    case GemmKernel::avx512_bf16: return "avx512-bf16 12x32";
    case GemmKernel::avx512_bf16_emulated: return "avx512f 12x32 (bf16 dot emulated)";
  }
  return "unknown";
}

bool gemm_kernel_rounds_to_bf16(GemmKernel k) {
  return k == GemmKernel::amx_bf16 || k == GemmKernel::avx512_bf16 || k == GemmKernel::avx512_bf16_emulated;
}

GemmKernel gemm_f32_kernel() {
  const int forced = g_forced_kernel.load(std::memory_order_relaxed);
  if (forced >= 0) return GemmKernel(forced);
  if (toggles::bf16_gemm() && amx_bf16_usable()) return GemmKernel::amx_bf16;
  if (toggles::avx512_gemm() && has_avx512f()) return GemmKernel::avx512;
  return has_avx2_fma() ? GemmKernel::avx2 : GemmKernel::scalar;
}

const char* gemm_f32_kernel_name() { return gemm_kernel_name(gemm_f32_kernel()); }

GemmKernel gemm_bf16_values_kernel() {
  const int forced = g_forced_kernel.load(std::memory_order_relaxed);
  if (forced < 0 && toggles::amx_bf16() && amx_bf16_usable()) return GemmKernel::amx_bf16;
  if (forced < 0 && toggles::avx512_bf16_dot() && has_avx512_bf16()) return GemmKernel::avx512_bf16;
  return gemm_f32_kernel();
}

ScopedGemmKernel::ScopedGemmKernel(GemmKernel k) : previous_(g_forced_kernel.load()) {
  MDL_CHECK(gemm_kernel_available(k), "ScopedGemmKernel: this CPU cannot run the ", gemm_kernel_name(k),
            " micro-kernel");
  g_forced_kernel.store(int(k));
}
ScopedGemmKernel::~ScopedGemmKernel() { g_forced_kernel.store(previous_); }

void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
              int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_any<float>("gemm_f32", M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, f32_path(gemm_f32_kernel()));
}

void gemm_f32_bf16_values(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_any<float>("gemm_f32", M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc,
                  f32_path(gemm_bf16_values_kernel()));
}

void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t rsa, int64_t csa,
               const BFloat16* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc) {
  gemm_any<float, BFloat16>("gemm_bf16", M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc,
                            bf16_path(gemm_bf16_values_kernel()));
}

namespace {

// The bf16-output loop of kernel k (the pair kernel or its emulation), or null where k has none.
using SerialToBf16 = decltype(&gemm_serial_bf16_dot_to_bf16);
SerialToBf16 serial_to_bf16(GemmKernel k) {
  if (k == GemmKernel::avx512_bf16) return gemm_serial_bf16_dot_to_bf16;
  if (k == GemmKernel::avx512_bf16_emulated) return gemm_serial_bf16_dot_to_bf16_emulated;
  return nullptr;
}

}  // namespace

bool gemm_bf16_rounds_in_registers(int64_t K) {
  return serial_to_bf16(gemm_bf16_values_kernel()) && K > 0 && K <= kPairsKC;
}

void gemm_bf16_to_bf16(int64_t M, int64_t N, int64_t K, const BFloat16* A, int64_t rsa, int64_t csa, const BFloat16* B,
                       int64_t rsb, int64_t csb, const float* bias, BFloat16* C, int64_t rsc) {
  MDL_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm_bf16_to_bf16: negative size M=", M, " N=", N, " K=", K);
  const GemmKernel k = gemm_bf16_values_kernel();
  const SerialToBf16 serial = serial_to_bf16(k);
  MDL_CHECK(serial && K > 0 && K <= kPairsKC, "gemm_bf16_to_bf16: not on this kernel (", gemm_kernel_name(k),
            ") with K=", K, " (ask gemm_bf16_rounds_in_registers)");
  if (M == 0 || N == 0) return;
  sync_float_mode();
  static_assert(sizeof(BFloat16) == sizeof(uint16_t));
  const auto* a = reinterpret_cast<const uint16_t*>(A);
  const auto* b = reinterpret_cast<const uint16_t*>(B);
  auto* c = reinterpret_cast<uint16_t*>(C);
  const int nt = threads_for(M, N, K);
  if (nt <= 1) return serial(M, N, K, a, rsa, csa, b, rsb, csb, bias, c, rsc);
  for_each_slab(nt, M, N, 12, 32, [&](int64_t lo, int64_t hi, bool split_n) {
    if (split_n) serial(M, hi - lo, K, a, rsa, csa, b + lo * csb, rsb, csb, bias ? bias + lo : nullptr, c + lo, rsc);
    else serial(hi - lo, N, K, a + lo * rsa, rsa, csa, b, rsb, csb, bias, c + lo * rsc, rsc);
  });
}

void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa, const double* B,
              int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc) {
  gemm_any<double>("gemm_f64", M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc,
                   packed_path<BlockingF64, kernel_scalar<double, BlockingF64::MR, BlockingF64::NR>>());
}

void gemm_f32_naive(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.0f;
      for (int64_t p = 0; p < K; ++p) s += A[i * K + p] * B[p * N + j];
      C[i * N + j] = s;
    }
}

// i-p-j order inside 64 x 256 x 512 blocks: the j loop streams rows of B and C (the compiler
// vectorizes it), a 256 x 512 block of B (512 KiB) is reused from L2 by 64 rows of A.
void gemm_f32_blocked(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  constexpr int64_t MB = 64, KB = 256, NB = 512;
  std::fill(C, C + M * N, 0.0f);
  for (int64_t jj = 0; jj < N; jj += NB)
    for (int64_t pp = 0; pp < K; pp += KB)
      for (int64_t ii = 0; ii < M; ii += MB) {
        const int64_t ie = std::min(M, ii + MB), pe = std::min(K, pp + KB), je = std::min(N, jj + NB);
        for (int64_t i = ii; i < ie; ++i) {
          float* c = C + i * N;
          for (int64_t p = pp; p < pe; ++p) {
            const float a = A[i * K + p];
            const float* b = B + p * N;
            for (int64_t j = jj; j < je; ++j) c[j] += a * b[j];
          }
        }
      }
}

void gemm_f32_packed(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  if (M == 0 || N == 0) return;
  if (K == 0) return std::fill(C, C + M * N, 0.0f);
  f32_path(gemm_f32_kernel()).serial(M, N, K, 1.0f, A, K, 1, B, N, 1, 0.0f, C, N, 1);
}

// ---- PackedA, PackedB ------------------------------------------------------------------------------

PackedOperand::PackedOperand() = default;
PackedOperand::~PackedOperand() = default;
void PackedOperand::Free::operator()(void* p) const { std::free(p); }

void* PackedOperand::reserve(int64_t n) {
  if (n > capacity_) {
    const size_t bytes = (size_t(n) * sizeof(float) + 63) / 64 * 64;
    buf_.reset(std::aligned_alloc(64, bytes));
    capacity_ = buf_ ? n : 0;
    MDL_CHECK(buf_, "gemm: cannot allocate ", bytes, " bytes for a packed operand");
  }
  return buf_.get();
}

int64_t gemm_panel_width(GemmPrecision precision) { return packed_layout_now(precision).NR; }

void PackedA::pack(int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa, GemmPrecision precision) {
  MDL_CHECK(M >= 0 && K >= 0, "PackedA: negative size M=", M, " K=", K);
  layout_ = &packed_layout_now(precision);
  void* buf = reserve(round_up(M, layout_->MR) * round_up(K, layout_->k_per_element) / layout_->k_per_element);
  rows_ = M, cols_ = K;
  if (M > 0 && K > 0) layout_->pack_a(M, K, A, rsa, csa, buf);
}

namespace {

// rows x cols bf16 values at (rs, cs) as row-major floats (exactly), in thread scratch 64-byte aligned.
const float* widened(const BFloat16* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  float* dst = packing_scratch<float>(2, rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = float(src[r * rs + c * cs]);
  return dst;
}
const uint16_t* bits(const BFloat16* p) { return reinterpret_cast<const uint16_t*>(p); }

}  // namespace

void PackedA::pack(int64_t M, int64_t K, const BFloat16* A, int64_t rsa, int64_t csa, GemmPrecision precision) {
  MDL_CHECK(M >= 0 && K >= 0, "PackedA: negative size M=", M, " K=", K);
  layout_ = &packed_layout_now(precision);
  void* buf = reserve(round_up(M, layout_->MR) * round_up(K, layout_->k_per_element) / layout_->k_per_element);
  rows_ = M, cols_ = K;
  if (M == 0 || K == 0) return;
  if (layout_->pack_a16) return layout_->pack_a16(M, K, bits(A), rsa, csa, buf);
  layout_->pack_a(M, K, widened(A, M, K, rsa, csa), K, 1, buf);
}

// The checks every times_panel makes, and its cases with no product (nothing to write, or C scaled
// by beta alone): true when the product is left to run.
bool PackedA::product_left(int64_t m, int64_t n, int64_t k, float alpha, float beta, float* C, int64_t rsc,
                           int64_t csc) const {
  MDL_CHECK(layout_ && m >= 0 && n >= 0 && k >= 0 && m <= rows_ && k <= cols_ && n <= layout_->NR,
            "PackedA::times_panel: the first ", m, "x", k, " of a packed ", rows_, "x", cols_, " matrix by a ", k, "x",
            n, " panel");
  if (m == 0 || n == 0) return false;
  if (k > 0 && alpha != 0.0f) return true;
  scale_c(m, n, beta, C, rsc, csc);
  return false;
}

void PackedA::times_panel(int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* panel, float beta, float* C,
                          int64_t rsc, int64_t csc) const {
  if (!product_left(m, n, k, alpha, beta, C, rsc, csc)) return;
  if (!layout_->times_panel16)
    return times_panel(m, n, k, alpha, widened(panel, k, layout_->NR, layout_->NR, 1), beta, C, rsc, csc);
  sync_float_mode();
  layout_->times_panel16(buf_.get(), rows_, cols_, m, n, k, alpha, bits(panel), beta, C, rsc, csc);
}

void PackedA::times_panel(int64_t m, int64_t n, int64_t k, float alpha, const float* panel, float beta, float* C,
                          int64_t rsc, int64_t csc) const {
  MDL_CHECK(reinterpret_cast<uintptr_t>(panel) % 64 == 0, "PackedA::times_panel: the panel must be 64-byte aligned");
  if (!product_left(m, n, k, alpha, beta, C, rsc, csc)) return;
  sync_float_mode();
  layout_->times_panel(buf_.get(), rows_, cols_, m, n, k, alpha, panel, beta, C, rsc, csc);
}

void PackedB::pack(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb, GemmPrecision precision) {
  MDL_CHECK(K >= 0 && N >= 0, "PackedB: negative size K=", K, " N=", N);
  layout_ = &packed_layout_now(precision);
  void* buf = reserve(round_up(K, layout_->k_per_element) / layout_->k_per_element * round_up(N, layout_->NR));
  rows_ = K, cols_ = N;
  if (K > 0 && N > 0) layout_->pack_b(K, N, B, rsb, csb, buf);
}

// As PackedA's, for times.
bool PackedB::product_left(int64_t M, int64_t n, int64_t k, float alpha, float beta, float* C, int64_t rsc,
                           int64_t csc) const {
  MDL_CHECK(layout_ && M >= 0 && n >= 0 && k >= 0 && k <= rows_ && n <= cols_, "PackedB::times: a ", M, "x", k,
            " by the first ", k, "x", n, " of a packed ", rows_, "x", cols_, " matrix");
  if (M == 0 || n == 0) return false;
  if (k > 0 && alpha != 0.0f) return true;
  scale_c(M, n, beta, C, rsc, csc);
  return false;
}

void PackedB::times(int64_t M, int64_t n, int64_t k, float alpha, const float* A, int64_t rsa, int64_t csa, float beta,
                    float* C, int64_t rsc, int64_t csc) const {
  if (!product_left(M, n, k, alpha, beta, C, rsc, csc)) return;
  sync_float_mode();
  layout_->times_b(buf_.get(), rows_, cols_, M, n, k, alpha, A, rsa, csa, beta, C, rsc, csc);
}

void PackedB::times(int64_t M, int64_t n, int64_t k, float alpha, const BFloat16* A, int64_t rsa, int64_t csa,
                    float beta, float* C, int64_t rsc, int64_t csc) const {
  if (!product_left(M, n, k, alpha, beta, C, rsc, csc)) return;
  if (!layout_->times_b16) return times(M, n, k, alpha, widened(A, M, k, rsa, csa), k, 1, beta, C, rsc, csc);
  sync_float_mode();
  layout_->times_b16(buf_.get(), rows_, cols_, M, n, k, alpha, bits(A), rsa, csa, beta, C, rsc, csc);
}

}  // namespace mdl::cpu
