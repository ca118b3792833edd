// Batched matrix product out[b] = a[b] @ b[b] on our GEMM. bf16 operands are packed by the GEMM
// as they are (gemm_bf16), f16 ones widened to f32 first (in bulk, F16C); the f32 result is
// rounded once (f32 accumulation, as tensor cores do), a bf16 one in the GEMM's registers
// (gemm_bf16_to_bf16).
// Many small matrices (attention heads) are spread over threads; big ones thread inside GEMM.
#include <algorithm>
#include <memory>
#include <utility>

#include "kernels/convert.h"
#include "cpu/kernels.h"
#include "cpu/gemm.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {
// Runs f(batch) over all batches: in parallel when each product is small.
template <class F>
void for_each_batch(int64_t B, int64_t M, int64_t N, int64_t K, const F& f) {
  // Small products: enough of them per thread to cover the cost of waking a thread (~64K FMAs);
  // big products keep the batch loop serial and thread inside the GEMM.
  const int64_t work = std::max<int64_t>(1, M * N * K);
  const int64_t grain = work >= (int64_t(1) << 21) ? B : std::max<int64_t>(1, (int64_t(1) << 16) / work);
  parallel_for(0, B, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b);
  });
}

// Widens a (rows, cols) 16-bit matrix with strides (rs, cs) into f32 at dst; returns the strides
// to read dst with. Rows (or columns) that are contiguous convert in bulk (F16C) and keep their
// order, so a transposed operand needs no gather. Threads split the lines of a big matrix (inside
// a batch-parallel loop they run on the calling thread).
template <class T>
std::pair<int64_t, int64_t> widen(const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
  const bool by_rows = cs == 1 || rs != 1;
  const int64_t lines = by_rows ? rows : cols, len = by_rows ? cols : rows;
  parallel_for(0, lines, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(len, 1)), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      if (cs == 1) to_f32(p + l * rs, dst + l * cols, cols);
      else if (rs == 1) to_f32(p + l * cs, dst + l * rows, rows);
      else
        for (int64_t c = 0; c < cols; ++c) dst[l * cols + c] = float(p[l * rs + c * cs]);
    }
  });
  return by_rows ? std::pair<int64_t, int64_t>{cols, 1} : std::pair<int64_t, int64_t>{1, rows};
}

// out (n) = the f32 result (n) rounded once, threaded like widen.
template <class T>
void narrow(const float* src, T* out, int64_t n) {
  parallel_for(0, n, kGrainSize, [&](int64_t i0, int64_t i1) { from_f32(src + i0, out + i0, i1 - i0); });
}
}  // namespace

// a (B,M,K), b (B,K,N) with any strides; out (B,M,N) contiguous, of their dtype or (16-bit a and b) f32.
void bmm(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const int64_t sab = a.stride(0), sam = a.stride(1), sak = a.stride(2);
  const int64_t sbb = b.stride(0), sbk = b.stride(1), sbn = b.stride(2);
  if (B == 0 || M == 0 || N == 0) return;
  const bool f32_out = out.dtype() == kF32 && a.dtype() != kF32;  // 16-bit products, f32 sums kept as they are
  dispatch(a.dtype(), "matmul", [&]<class T>() {
    T* o = f32_out ? nullptr : out.data_ptr<T>();
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    if constexpr (std::is_same_v<T, float>) {
      for_each_batch(B, M, N, K, [&](int64_t i) {
        gemm_f32(M, N, K, 1.0f, pa + i * sab, sam, sak, pb + i * sbb, sbk, sbn, 0.0f, o + i * M * N, N, 1);
      });
    } else if constexpr (std::is_same_v<T, double>) {
      for_each_batch(B, M, N, K, [&](int64_t i) {
        gemm_f64(M, N, K, 1.0, pa + i * sab, sam, sak, pb + i * sbb, sbk, sbn, 0.0, o + i * M * N, N, 1);
      });
    } else if constexpr (is_half_v<T>) {
      // f32 scratch per batch-loop thread, from the CPU allocator (large blocks come back from its
      // cache, not as fresh pages to fault in on every call): the f32 result, and for f16 the
      // widened operands before it (bf16 ones are packed as they are, gemm_bf16).
      constexpr bool kBf16 = std::is_same_v<T, BFloat16>;
      const bool batch_threads = B > 1 && !in_parallel_region();
      // bf16 results the GEMM rounds in its registers need no f32 scratch (gemm_bf16_to_bf16)
      const bool direct = kBf16 && !f32_out && gemm_bf16_rounds_in_registers(K);
      const int64_t operands = kBf16 ? 0 : M * K + K * N, per = operands + (f32_out || direct ? 0 : M * N);
      const int64_t slots = batch_threads ? get_num_threads() : 1;
      Tensor scratch = make_tensor({slots * per}, kF32, Device::cpu());
      for_each_batch(B, M, N, K, [&](int64_t i) {
        float* fa = per ? scratch.data_ptr<float>() + (batch_threads ? thread_index() : 0) * per : nullptr;
        float* fc = f32_out ? out.data_ptr<float>() + i * M * N : fa + operands;
        if constexpr (kBf16) {
          // a bf16 result rounded in the GEMM's registers (gemm_bf16_to_bf16), an f32 one as it is
          if (direct)
            return gemm_bf16_to_bf16(M, N, K, pa + i * sab, sam, sak, pb + i * sbb, sbk, sbn, nullptr, o + i * M * N,
                                     N);
          gemm_bf16(M, N, K, 1.0f, pa + i * sab, sam, sak, pb + i * sbb, sbk, sbn, 0.0f, fc, N, 1);
        } else {
          float* fb = fa + M * K;
          const auto [rsa, csa] = widen(pa + i * sab, M, K, sam, sak, fa);
          const auto [rsb, csb] = widen(pb + i * sbb, K, N, sbk, sbn, fb);
          gemm_f32(M, N, K, 1.0f, fa, rsa, csa, fb, rsb, csb, 0.0f, fc, N, 1);
        }
        if (!f32_out) narrow(fc, o + i * M * N, M * N);
      });
    } else {
      // Integers: a plain loop in the type's own arithmetic (wrapping through unsigned).
      using U = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint64_t, T>>;
      for_each_batch(B, M, N, K, [&](int64_t i) {
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            U acc = 0;
            for (int64_t k = 0; k < K; ++k)
              acc += U(pa[i * sab + m * sam + k * sak]) * U(pb[i * sbb + k * sbk + n * sbn]);
            o[i * M * N + m * N + n] = std::is_same_v<T, bool> ? T(acc != 0) : T(acc);
          }
      });
    }
  });
}

}  // namespace mdl::cpu
