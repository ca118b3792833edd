// CPU matrix multiply: the BLIS-style f32 GEMM (packed panels, AVX-512 or AVX2/FMA micro-kernel
// chosen at run time, OpenMP),
// a blocked f64 GEMM for reference checks, and the slower rungs of the ladder the benchmark
// climbs (naive, cache-blocked, packed single-threaded).
#pragma once
#include <cstdint>
#include <memory>

namespace mdl {
struct BFloat16;
}

namespace mdl::cpu {

// C = alpha * A @ B + beta * C, BLIS-style general strides (in elements).
// A is MxK with element (i,p) at A[i*rsa + p*csa]; B is KxN at B[p*rsb + j*csb];
// C is MxN at C[i*rsc + j*csc]. When beta == 0, C is not read (NaN in C does not leak);
// when alpha == 0 or K == 0, A and B are not read.
// Threads: omp_get_max_threads(), or one thread for small problems and inside a parallel region.
// Deterministic: each element of C sums over K in the same order whatever the thread count.
void gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa, const float* B,
              int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);
void gemm_f64(int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t rsa, int64_t csa, const double* B,
              int64_t rsb, int64_t csb, double beta, double* C, int64_t rsc, int64_t csc);

// The rungs of the ladder: row-major contiguous, C = A @ B (C not read).
void gemm_f32_naive(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C);    // i,j,p loops
void gemm_f32_blocked(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C);  // cache blocks
void gemm_f32_packed(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C);   // packed, 1 thread

// The f32 micro-kernels. gemm_f32 runs the widest one the CPU has: AVX-512 (unless the
// avx512_gemm switch is off), else AVX2 + FMA, else portable C++; with the bf16_gemm switch on and
// a CPU with AMX-BF16, it rounds A and B to bf16 and multiplies them on AMX tiles instead.
// The bf16 kernels (amx_bf16, avx512_bf16, avx512_bf16_emulated) round A and B to bf16 as they pack
// them. avx512_bf16 multiplies pairs of them by VDPBF16PS; avx512_bf16_emulated runs its loops with
// each VDPBF16PS written as two FMAs, on any AVX-512 CPU: tests reach the native kernel's logic with it.
enum class GemmKernel { scalar, avx2, avx512, amx_bf16, avx512_bf16, avx512_bf16_emulated };
bool gemm_kernel_available(GemmKernel k);
// "scalar 6x16", "avx2-fma 6x16", "avx512f 12x32", "amx-bf16 32x32", "avx512-bf16 12x32",
// "avx512f 12x32 (bf16 dot emulated)"
const char* gemm_kernel_name(GemmKernel k);
bool gemm_kernel_rounds_to_bf16(GemmKernel k);  // one of the bf16 kernels
GemmKernel gemm_f32_kernel();                   // the one gemm_f32 runs now
const char* gemm_f32_kernel_name();


// gemm_f32 for operands that hold bf16 values (widened from bf16 tensors, so rounding them to bf16
// changes nothing): with the amx_bf16 switch on (the default) and a CPU with AMX-BF16 they multiply
// on AMX tiles; else, with the avx512_bf16_dot switch on (the default) and a CPU with AVX512-BF16,
// by VDPBF16PS; else as gemm_f32. Autocast bf16's matmuls and convs on the CPU come here.
void gemm_f32_bf16_values(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t rsa, int64_t csa,
                          const float* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);
GemmKernel gemm_bf16_values_kernel();  // the kernel it runs now

// C (f32) = alpha * A @ B + beta * C for bf16 A and B, on the kernel gemm_f32_bf16_values runs:
// the operands are packed straight from bf16 (widened exactly as they are packed for the f32
// kernels, paired as they are for VDPBF16PS), with no widened copy of them (AMX's packing alone
// still widens each thread's operands first).
void gemm_bf16(int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t rsa, int64_t csa,
               const BFloat16* B, int64_t rsb, int64_t csb, float beta, float* C, int64_t rsc, int64_t csc);

// C (bf16, M x N, rows rsc apart, columns contiguous) = bf16(A @ B + bias[j]) for bf16 A and B: the
// micro-kernel adds the bias (may be null: none) to each final sum and rounds it once in its registers,
// so no f32 product is written or read back; the bits of gemm_bf16 into f32, then the bias added in f32
// and f32_to_bf16. Only where gemm_bf16_rounds_in_registers(K): gemm_bf16 runs the pair kernel
// (VDPBF16PS, or its emulation) and 0 < K <= 384, its K step, so each tile is final when the kernel ends.
bool gemm_bf16_rounds_in_registers(int64_t K);
void gemm_bf16_to_bf16(int64_t M, int64_t N, int64_t K, const BFloat16* A, int64_t rsa, int64_t csa, const BFloat16* B,
                       int64_t rsb, int64_t csb, const float* bias, BFloat16* C, int64_t rsc);

// ---- Operands packed once, for products that reuse them -----------------------------------------------
// Attention multiplies every tile of queries by the same keys and values; packing them again for each
// tile cost more than a fifth of its time. These run on the calling thread, on the micro-kernel their
// precision (given to pack) chooses at the time of packing:
//   f32: the f32 kernel gemm_f32 runs (a bf16 kernel's place taken by the CPU's widest f32 one), each
//        element of C summed over k in the same order as gemm_f32 sums it;
//   bf16: operands held as bf16 pairs for the pair-dot kernel that gemm_f32_bf16_values runs: VDPBF16PS
//        where the CPU has AVX512-BF16 and the avx512_bf16_dot switch is on (also where AMX takes
//        gemm_f32_bf16_values), its AVX-512F emulation under ScopedGemmKernel(avx512_bf16_emulated), the
//        sums those kernels' GEMM gives (gemm_serial_bf16_dot); else, the f32 layout above. Every
//        operand of a product, the panel and the unpacked A included, is rounded to bf16.
//
// A packed B of at most gemm_panel_width() columns is one micro-panel: its K rows of
// gemm_panel_width() floats, one after another. So a row-major K x gemm_panel_width() buffer, 64-byte
// aligned, IS a packed B for f32, and a product that writes such a buffer feeds the next without
// packing (for bf16, times_panel pairs it first).

enum class GemmPrecision { f32, bf16 };

class PackedOperand {
 public:
  PackedOperand();
  ~PackedOperand();
  PackedOperand(const PackedOperand&) = delete;
  PackedOperand& operator=(const PackedOperand&) = delete;
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  struct Layout;  // the micro-kernel, its tile, its KC and its element: a float or a pair of bf16 (gemm.cpp)

 protected:
  void* reserve(int64_t n);  // n 4-byte elements, 64-byte aligned; an earlier buffer reused when large enough
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> buf_;
  int64_t capacity_ = 0, rows_ = 0, cols_ = 0;
  const Layout* layout_ = nullptr;
};

// A (M x K) packed into the micro-kernel's row panels.
class PackedA : public PackedOperand {
 public:
  void pack(int64_t M, int64_t K, const float* A, int64_t rsa, int64_t csa,
            GemmPrecision precision = GemmPrecision::f32);
  // C (m x n) = alpha * A[:m, :k] @ B + beta * C, for m <= rows(), k <= cols(), n <= gemm_panel_width(precision),
  // B (k x n) a row-major panel: `panel`, 64-byte aligned, row p at panel + p * gemm_panel_width(precision).
  // C is not read when beta == 0.
  void times_panel(int64_t m, int64_t n, int64_t k, float alpha, const float* panel, float beta, float* C, int64_t rsc,
                   int64_t csc) const;
  // The same from bf16 values: the pair kernel pairs their bits as they are, where the f32 layouts
  // widen them first (exactly); either way the products equal those of the floats they hold. The
  // bf16 panel's row p is at panel + p * gemm_panel_width(precision); it needs no alignment.
  void pack(int64_t M, int64_t K, const BFloat16* A, int64_t rsa, int64_t csa,
            GemmPrecision precision = GemmPrecision::f32);
  void times_panel(int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* panel, float beta, float* C,
                   int64_t rsc, int64_t csc) const;

 private:
  bool product_left(int64_t m, int64_t n, int64_t k, float alpha, float beta, float* C, int64_t rsc, int64_t csc) const;
};

// B (K x N) packed into the micro-kernel's column panels.
class PackedB : public PackedOperand {
 public:
  void pack(int64_t K, int64_t N, const float* B, int64_t rsb, int64_t csb,
            GemmPrecision precision = GemmPrecision::f32);
  // C (M x n) = alpha * A (M x k) @ B[:k, :n] + beta * C, for k <= rows() and n <= cols(); A is packed
  // as it is read. C is not read when beta == 0.
  void times(int64_t M, int64_t n, int64_t k, float alpha, const float* A, int64_t rsa, int64_t csa, float beta,
             float* C, int64_t rsc, int64_t csc) const;
  // The same with A of bf16 values (paired as they are, or widened exactly).
  void times(int64_t M, int64_t n, int64_t k, float alpha, const BFloat16* A, int64_t rsa, int64_t csa, float beta,
             float* C, int64_t rsc, int64_t csc) const;

 private:
  bool product_left(int64_t M, int64_t n, int64_t k, float alpha, float beta, float* C, int64_t rsc, int64_t csc) const;
};

// The micro-kernel's columns (NR) that PackedA and PackedB would pack for now at this precision: 32 on
// AVX-512 and on the pair kernel, 16 else.
int64_t gemm_panel_width(GemmPrecision precision = GemmPrecision::f32);

// While it lives, every gemm_f32 and gemm_f32_bf16_values in the process runs kernel `k` (tests and
// benchmarks use it to reach each fallback); throws mdl::Error when this CPU cannot run `k`.
class ScopedGemmKernel {
 public:
  explicit ScopedGemmKernel(GemmKernel k);
  ~ScopedGemmKernel();
  ScopedGemmKernel(const ScopedGemmKernel&) = delete;
  ScopedGemmKernel& operator=(const ScopedGemmKernel&) = delete;

 private:
  int previous_;
};

}  // namespace mdl::cpu
