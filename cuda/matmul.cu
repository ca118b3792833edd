// Batched matmul out[b] = a[b] @ b[b] through cublasGemmStridedBatchedEx: f32 (TF32 tensor cores
// only when toggles::allow_tf32()), f64, and f16/bf16 on tensor cores with f32 accumulation. Operands
// with one unit stride among their last two dims are passed as they are (transposed or not);
// others are made contiguous first. Integer dtypes run a plain kernel with wrapping arithmetic.
#include "cuda/common.cuh"
#include "cuda/kernels.cuh"
#include "cuda/api.h"
#include "kernels/views.h"
#include "switches/list/toggles.h"

namespace mdl::cuda {

using namespace detail;

namespace {

// A (B, R, C) operand as cuBLAS sees it in column-major terms.
struct Operand {
  Tensor t;
  cublasOperation_t op;  // applied to the column-major view to get this operand's transpose
  int64_t ld, batch_stride;
};

// Row-major X (R, C) is column-major X^T with ld = stride(1) (op N); a "transposed" X (unit stride
// along rows) is column-major X with ld = stride(2) (op T).
Operand as_operand(const Tensor& x) {
  const int64_t R = x.size(1), C = x.size(2), kMaxLd = std::numeric_limits<int>::max();
  // A view's row stride is cuBLAS's leading dimension, an int: past INT_MAX the view is copied.
  const int64_t s1 = R == 1 ? std::max<int64_t>(C, 1) : x.stride(1), s2 = C == 1 ? 1 : x.stride(2);
  if (s2 == 1 && s1 >= std::max<int64_t>(C, 1) && s1 <= kMaxLd) return {x, CUBLAS_OP_N, s1, x.stride(0)};
  const int64_t t1 = R == 1 ? 1 : x.stride(1), t2 = C == 1 ? std::max<int64_t>(R, 1) : x.stride(2);
  if (t1 == 1 && t2 >= std::max<int64_t>(R, 1) && t2 <= kMaxLd) return {x, CUBLAS_OP_T, t2, x.stride(0)};
  Tensor c = kernels::contiguous(x);
  return {c, CUBLAS_OP_N, std::max<int64_t>(C, 1), R * C};
}

template <class T>
__global__ void int_bmm_kernel(int64_t B, int64_t M, int64_t N, int64_t K, const T* a, int64_t sab, int64_t sam,
                               int64_t sak, const T* b, int64_t sbb, int64_t sbk, int64_t sbn, T* out) {
  using U = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint64_t, T>>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < B * M * N;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bi = i / (M * N), m = i / N % M, n = i % N;
    U acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += U(a[bi * sab + m * sam + k * sak]) * U(b[bi * sbb + k * sbk + n * sbn]);
    out[i] = std::is_same_v<T, bool> ? T(acc != 0) : T(acc);
  }
}

}  // namespace

void bmm(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  if (B == 0 || M == 0 || N == 0) return;
  const DType t = a.dtype();  // out is of t, or f32 for f16/bf16 t (kernels/core.h)
  if (!is_floating(t)) {
    dispatch<DeviceTypes>(t, "matmul", [&]<class T>() {
      if constexpr (!is_float_v<T>) {
        int_bmm_kernel<T><<<blocks_for(B * M * N), kThreads, 0, stream()>>>(
            B, M, N, K, ptr<const T>(a), a.stride(0), a.stride(1), a.stride(2), ptr<const T>(b), b.stride(0),
            b.stride(1), b.stride(2), ptr<T>(out));
        CUDA_CHECK_LAUNCH("matmul");
      }
    });
    return;
  }
  const int64_t kMaxInt = std::numeric_limits<int>::max();
  MDL_CHECK(M <= kMaxInt && N <= kMaxInt && K <= kMaxInt && B <= kMaxInt, "matmul: sizes (", B, ", ", M, ", ", K,
            ") @ (", B, ", ", K, ", ", N, ") exceed cuBLAS's int range");
  // Row-major out (M, N) = a @ b is column-major out^T (N, M) = b^T a^T.
  const Operand oa = as_operand(a), ob = as_operand(b);
  cudaDataType_t dt = CUDA_R_32F;
  cublasComputeType_t ct = toggles::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = &one_f;
  const void* beta = &zero_f;
  if (t == kF64) dt = CUDA_R_64F, ct = CUBLAS_COMPUTE_64F, alpha = &one_d, beta = &zero_d;
  if (t == kF16) dt = CUDA_R_16F, ct = CUBLAS_COMPUTE_32F;
  if (t == kBF16) dt = CUDA_R_16BF, ct = CUBLAS_COMPUTE_32F;
  const cudaDataType_t out_dt = out.dtype() == t ? dt : CUDA_R_32F;
  CUBLAS_CHECK("matmul", cublasSetMathMode(cublas(), CUBLAS_DEFAULT_MATH));
  CUBLAS_CHECK("matmul", cublasGemmStridedBatchedEx(cublas(), ob.op, oa.op, int(N), int(M), int(K), alpha,
                                                    ob.t.raw_data(), dt, int(ob.ld), ob.batch_stride, oa.t.raw_data(),
                                                    dt, int(oa.ld), oa.batch_stride, beta, out.raw_data(), out_dt,
                                                    int(N), M * N, int(B), ct, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mdl::cuda
