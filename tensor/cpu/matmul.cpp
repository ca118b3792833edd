// Batched matrix product out[b] = a[b] @ b[b] on our GEMM. f16/bf16 operands are widened to
// f32 panels and the f32 result rounded once (f32 accumulation, as tensor cores do).
// Many small matrices (attention heads) are spread over threads; big ones thread inside GEMM.
#include <algorithm>
#include <vector>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
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
}  // namespace

// a (B,M,K), b (B,K,N) with any strides; out (B,M,N) contiguous.
void bmm(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const int64_t sab = a.stride(0), sam = a.stride(1), sak = a.stride(2);
  const int64_t sbb = b.stride(0), sbk = b.stride(1), sbn = b.stride(2);
  if (B == 0 || M == 0 || N == 0) return;
  dispatch(out.dtype(), "matmul", [&]<class T>() {
    T* o = out.data_ptr<T>();
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
      for_each_batch(B, M, N, K, [&](int64_t i) {
        std::vector<float> fa(size_t(M * K)), fb(size_t(K * N)), fc(size_t(M * N));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < K; ++k) fa[size_t(m * K + k)] = float(pa[i * sab + m * sam + k * sak]);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n) fb[size_t(k * N + n)] = float(pb[i * sbb + k * sbk + n * sbn]);
        gemm_f32(M, N, K, 1.0f, fa.data(), K, 1, fb.data(), N, 1, 0.0f, fc.data(), N, 1);
        for (int64_t j = 0; j < M * N; ++j) o[i * M * N + j] = T(fc[size_t(j)]);
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
