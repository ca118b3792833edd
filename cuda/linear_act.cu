// The fused linear layer on CUDA: one cublasLtMatmul whose epilogue adds the bias and applies
// ReLU or GELU (BIAS, RELU_BIAS, GELU_AUX_BIAS, which also writes GELU's input for the backward),
// f32 (TF32 when toggles::allow_tf32()), f16 and bf16 with f32 compute. The algorithm comes from
// cublasLtMatmulAlgoGetHeuristic once per (dtype, TF32, epilogue, shape, operand alignments) and
// is cached. Where cuBLASLt has no algorithm (f64, GELU with out_features not a multiple of 8),
// the GEMM runs through cuBLAS and one kernel of ours adds the bias and applies the activation.
// The backward's activation gradient and the bias gradient (its column sums) are one kernel of ours
// and a pass adding its row pieces' partial sums.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/runtime/cublaslt.cuh"
#include "cuda/kernels.cuh"
#include "cuda/api.h"
#include "kernels/linear_act.h"
#include "kernels/views.h"
#include "switches/list/toggles.h"

namespace mdl::cuda {

using namespace detail;

namespace {

// The fallback epilogue, in place on out (M, N): pre = out + bias; out = act(pre).
template <class T>
__global__ void bias_act_kernel(int64_t M, int64_t N, T* out, T* pre, const T* bias, Activation act) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N; i += int64_t(gridDim.x) * blockDim.x) {
    const A v = to_acc(out[i]) + (bias ? to_acc(bias[i % N]) : A(0));
    if (pre) pre[i] = convert<T>(v);
    out[i] = convert<T>(act_forward(act, v));
  }
}

// One element of grad_pre = grad_out * act'(saved), rounded to T; has_saved is false for None. ReLU's
// is a select, as the CPU's: grad_out where saved > 0, else +0 (an infinite grad_out times 0 is NaN).
template <class T>
__device__ __forceinline__ T grad_pre_of(T grad_out, T saved, bool has_saved, Activation act) {
  using A = acc_t<T>;
  const A g = to_acc(grad_out);
  if (!has_saved) return convert<T>(g);
  if (act == Activation::Relu) return convert<T>(to_acc(saved) > A(0) ? g : A(0));
  return convert<T>(g * act_derivative(act, to_acc(saved)));
}

// grad_pre (n), elementwise.
template <class T>
__global__ void act_backward_kernel(int64_t n, T* grad_pre, const T* grad_out, const T* saved, Activation act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    grad_pre[i] = grad_pre_of(grad_out[i], saved ? saved[i] : grad_out[i], saved != nullptr, act);
}

// ---- the backward's activation gradient with the bias sums in the same pass ----------------------
// grad_pre (M, N) and its column sums, the bias gradient: block (blockIdx.x, p) of (32, kSumRows)
// threads takes columns c = 32 * blockIdx.x + tx over rows ty, ty + kSumRows, ... of piece p, each
// warp reading 32 neighbouring values of a row; the block adds its kSumRows partial sums in order
// and writes one per column to part (P, N). A second kernel adds each column's P partials in order,
// so the sums do not depend on timing. The gradient is read once, where a separate reduction read
// it again after the activation pass wrote it.
constexpr int kSumRows = 8;
constexpr int kRowsAhead = 4;  // rows a thread loads before it stores the first: loads in flight

// grad_pre = grad_out * act'(saved) where `write` (saved null: a copy), else grad_pre is grad_out
// and is only read (written, it is a buffer of its own: hence __restrict__); part (P, N) gets the
// column sums of grad_pre as stored, in A, each thread's rows added in order.
template <class T>
__global__ void act_backward_sums_kernel(int64_t M, int64_t N, int64_t piece, T* __restrict__ grad_pre,
                                         const T* __restrict__ grad_out, const T* __restrict__ saved, Activation act,
                                         bool write, acc_t<T>* __restrict__ part) {
  using A = acc_t<T>;
  __shared__ A sums[kSumRows][32];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x, j0 = blockIdx.y * piece;
  const int64_t j1 = j0 + piece < M ? j0 + piece : M;
  A s = 0;
  if (c < N)
    for (int64_t j = j0 + threadIdx.y; j < j1; j += kSumRows * kRowsAhead) {
      T g[kRowsAhead] = {}, sv[kRowsAhead] = {};
#pragma unroll
      for (int u = 0; u < kRowsAhead; ++u) {
        const int64_t i = (j + u * kSumRows) * N + c;
        if (j + u * kSumRows < j1) g[u] = grad_out[i], sv[u] = saved ? saved[i] : g[u];
      }
#pragma unroll
      for (int u = 0; u < kRowsAhead; ++u) {
        if (j + u * kSumRows >= j1) break;
        const T v = write ? grad_pre_of(g[u], sv[u], saved != nullptr, act) : g[u];
        if (write) grad_pre[(j + u * kSumRows) * N + c] = v;
        s += to_acc(v);
      }
    }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= N) return;
  for (int r = 1; r < kSumRows; ++r) s += sums[r][threadIdx.x];
  part[blockIdx.y * N + c] = s;
}

// grad_bias[c] = the P partials of column c, added in order.
template <class A, class B>
__global__ void column_totals_kernel(int64_t P, int64_t N, const A* part, B* grad_bias) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < N; c += int64_t(gridDim.x) * blockDim.x) {
    A s = 0;
    for (int64_t p = 0; p < P; ++p) s += part[p * N + c];
    grad_bias[c] = convert<B>(s);
  }
}

// Row pieces for M rows of N columns: about 1024 blocks, and no more pieces than M / 32 rounded up.
int64_t row_pieces(int64_t M, int64_t N) {
  const int64_t column_blocks = (N + 31) / 32;
  return std::max<int64_t>(1, std::min((1024 + column_blocks - 1) / column_blocks, (M + 31) / 32));
}

// The largest power of two (up to 256) dividing the address: what cuBLASLt may assume of it.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t r = 256;
  while (r > 1 && a % r) r /= 2;
  return r;
}

// The cuBLASLt descriptors of one call, destroyed on every path out.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtDescs() = default;
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// (dtype, tf32, epilogue, M, N, K, alignment of w, x, out, bias, pre) -> the heuristic's choice,
// or nothing when cuBLASLt offered none (the fallback runs).
using AlgoKey =
    std::tuple<int, bool, uint32_t, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;
std::mutex g_algo_mu;
std::atomic<int64_t> g_fallbacks{0};
struct Choice {
  bool found = false;  // false: no algorithm, the fallback runs
  cublasLtMatmulAlgo_t algo{};
};
std::map<AlgoKey, Choice> g_algos;

cublasLtEpilogue_t epilogue_for(Activation act, bool bias) {
  switch (act) {
    case Activation::Relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::GeluTanh: return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// Row-major out (M, N) = x (M, K) @ w^T is column-major out^T (N, M) = op(A) B with A = w stored
// column-major as (K, N) (transposed by TRANSA) and B = x stored column-major as (K, M). The bias
// runs along D's rows (out_features) and GELU's aux matrix has D's layout (ld N). Returns false
// when cuBLASLt has no algorithm for this case.
bool lt_matmul(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
               Activation act) {
  const DType t = out.dtype();
  if (t == kF64) return false;  // cuBLASLt's epilogues are for f32 and narrower types
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  if (M > kMaxInt || N > kMaxInt || K > kMaxInt) return false;
  if (act == Activation::GeluTanh && N % 8 != 0) return false;  // the aux ld must be a multiple of 8
  const cudaDataType_t dt = t == kF16 ? CUDA_R_16F : t == kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  const bool tf32 = t == kF32 && toggles::allow_tf32();
  const cublasComputeType_t ct = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasLtEpilogue_t epi = epilogue_for(act, bias.defined());
  const void* bias_ptr = bias.defined() ? bias.raw_data() : nullptr;
  void* aux_ptr = pre.defined() ? pre.raw_data() : nullptr;
  // The preference's alignments cover A, B, C and D only; an epilogue may read the bias and write the
  // aux matrix 16 bytes at a time, so either one off 16 bytes (a slice of a packed bias) takes the fallback.
  if ((bias_ptr && alignment(bias_ptr) < 16) || (aux_ptr && alignment(aux_ptr) < 16)) return false;

  LtDescs desc;
  const char* op = "linear_act";
  CUBLAS_CHECK(op, cublasLtMatmulDescCreate(&desc.op, ct, CUDA_R_32F));
  const int32_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  const uint32_t epi_u = uint32_t(epi);
  CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi_u, sizeof(epi_u)));
  if (bias_ptr)
    CUBLAS_CHECK(
        op, cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
  if (act == Activation::GeluTanh) {
    const int64_t aux_ld = N;
    CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_ptr,
                                                    sizeof(aux_ptr)));
    CUBLAS_CHECK(
        op, cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
  }
  CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&desc.a, dt, uint64_t(K), uint64_t(N), K));
  CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&desc.b, dt, uint64_t(K), uint64_t(M), K));
  CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&desc.d, dt, uint64_t(N), uint64_t(M), N));

  const uint32_t al_a = alignment(w.raw_data()), al_b = alignment(x.raw_data()), al_d = alignment(out.raw_data());
  const AlgoKey key{int(t), tf32, epi_u, M, N, K, al_a, al_b, al_d, alignment(bias_ptr), alignment(aux_ptr)};
  Choice choice;
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    auto it = g_algos.find(key);
    if (it != g_algos.end()) {
      choice = it->second;
    } else {
      CUBLAS_CHECK(op, cublasLtMatmulPreferenceCreate(&desc.pref));
      const uint64_t ws = kCublasLtWorkspaceBytes;
      CUBLAS_CHECK(op, cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                            sizeof(ws)));
      const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_d},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_d}};
      for (const auto& [attr, value] : aligns)
        CUBLAS_CHECK(op, cublasLtMatmulPreferenceSetAttribute(desc.pref, attr, &value, sizeof(value)));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(cublaslt(), desc.op, desc.a, desc.b, desc.d, desc.d,
                                                              desc.pref, 1, &result, &found);
      // NOT_SUPPORTED or INVALID_VALUE here means "no kernel for this combination": the fallback runs.
      if (s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_INVALID_VALUE) CUBLAS_CHECK(op, s);
      if (s == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
          result.workspaceSize <= kCublasLtWorkspaceBytes)
        choice = {true, result.algo};
      g_algos.emplace(key, choice);
    }
  }
  if (!choice.found) return false;
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t s = cublasLtMatmul(cublaslt(), desc.op, &one, w.raw_data(), desc.a, x.raw_data(), desc.b, &zero,
                                          out.raw_data(), desc.d, out.raw_data(), desc.d, &choice.algo,
                                          cublaslt_workspace(), kCublasLtWorkspaceBytes, stream());
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) {  // refused before launching anything: remember, and fall back
    std::lock_guard<std::mutex> lock(g_algo_mu);
    g_algos[key] = Choice{};
    return false;
  }
  CUBLAS_CHECK(op, s);
  return true;
}

}  // namespace

void linear_act_forward(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& bias,
                        Activation act) {
  for (const Tensor* t : {&out, &pre, &x, &w, &bias}) check_on_gpu("linear_act", *t, "an operand");
  if (lt_matmul(out, pre, x, w, bias, act)) return;
  // The fallback: the GEMM through cuBLAS, then one bias+activation pass.
  g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  cuda::bmm(kernels::view_contiguous(out, {1, M, N}), kernels::view_contiguous(x, {1, M, K}),
            kernels::unsqueezed(kernels::transposed(w, 0, 1), 0));
  if (!bias.defined() && act == Activation::None) return;
  dispatch_floating<DeviceTypes>(out.dtype(), "linear_act", [&]<class T>() {
    bias_act_kernel<T><<<blocks_for(M * N), kThreads, 0, stream()>>>(
        M, N, ptr<T>(out), pre.defined() ? ptr<T>(pre) : nullptr, bias.defined() ? ptr<const T>(bias) : nullptr, act);
    CUDA_CHECK_LAUNCH("linear_act");
  });
}

void linear_act_backward(const Tensor& grad_pre, const Tensor& grad_bias, const Tensor& grad_out, const Tensor& saved,
                         Activation act) {
  for (const Tensor* t : {&grad_pre, &grad_bias, &grad_out, &saved})
    check_on_gpu("linear_act_backward", *t, "an operand");
  const int64_t M = grad_out.size(0), N = grad_out.size(1);
  if (M == 0 || N == 0) {  // nothing to write but the bias's empty sums
    if (grad_bias.defined() && grad_bias.numel()) cuda::fill(grad_bias, 0.0);
    return;
  }
  MDL_CHECK(!grad_bias.defined() || grad_bias.dtype() == grad_out.dtype() || grad_bias.dtype() == kF32,
            "linear_act_backward: the bias gradient is ", grad_bias.dtype(), " for a ", grad_out.dtype(),
            " gradient; expected the same dtype or f32");
  const bool write = act != Activation::None || grad_pre.raw_data() != grad_out.raw_data();
  dispatch_floating<DeviceTypes>(grad_out.dtype(), "linear_act_backward", [&]<class T>() {
    const T* saved_p = act == Activation::None ? nullptr : ptr<const T>(saved);
    if (!grad_bias.defined()) {
      if (!write) return;
      act_backward_kernel<T>
          <<<blocks_for(M * N), kThreads, 0, stream()>>>(M * N, ptr<T>(grad_pre), ptr<const T>(grad_out), saved_p, act);
      CUDA_CHECK_LAUNCH("linear_act_backward");
      return;
    }
    using A = acc_t<T>;
    const int64_t P = row_pieces(M, N), piece = (M + P - 1) / P;
    Tensor part = make_tensor({P, N}, std::is_same_v<A, double> ? kF64 : kF32, grad_out.device());
    act_backward_sums_kernel<T><<<dim3(unsigned((N + 31) / 32), unsigned(P)), dim3(32, kSumRows), 0, stream()>>>(
        M, N, piece, ptr<T>(grad_pre), ptr<const T>(grad_out), saved_p, act, write, ptr<A>(part));
    CUDA_CHECK_LAUNCH("linear_act_backward");
    if (grad_bias.dtype() == grad_out.dtype())
      column_totals_kernel<A, T><<<blocks_for(N), kThreads, 0, stream()>>>(P, N, ptr<const A>(part), ptr<T>(grad_bias));
    else  // f32 sums of 16-bit operands (amp_f32_grads)
      column_totals_kernel<A, float>
          <<<blocks_for(N), kThreads, 0, stream()>>>(P, N, ptr<const A>(part), ptr<float>(grad_bias));
    CUDA_CHECK_LAUNCH("linear_act_backward");
  });
}

int64_t linear_act_fallbacks() { return g_fallbacks.load(std::memory_order_relaxed); }

}  // namespace mdl::cuda
