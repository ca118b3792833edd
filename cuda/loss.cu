// The fused softmax cross-entropy on the GPU, forward beside backward, with the arithmetic of
// cpu/loss.cpp: one block per (n, d) row of C logits finds the max, sums exp(x - max) and
// x - max in double, and writes the loss with its label smoothing and the log of the shifted sum; the
// backward finds the max again and rebuilds the softmax from that saved log.
#include "cuda/kernels.cuh"
#include "cuda/rows.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class A>
__device__ __forceinline__ A nan_max(A m, A v) {
  return (v > m || v != v) && m == m ? v : m;
}

// The max over row r of logits (N, C, D): elements x[(n * C + c) * D + d].
template <class T>
__device__ acc_t<T> row_max(const T* row, int64_t C, int64_t D) {
  using A = acc_t<T>;
  A m = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += kRowBlock) m = nan_max(m, to_acc(row[c * D]));
  return block_max(m);
}

template <class T>
__global__ void ce_forward_kernel(acc_t<T>* loss, acc_t<T>* logsum, const T* x, const int64_t* target, int64_t N,
                                  int64_t C, int64_t D, int64_t ignore_index, double ls) {
  using A = acc_t<T>;
  for (int64_t r = blockIdx.x; r < N * D; r += gridDim.x) {
    const T* row = x + (r / D) * C * D + r % D;  // (C) with stride D
    const A m = row_max(row, C, D);
    double se = 0, sx = 0;
    for (int64_t c = threadIdx.x; c < C; c += kRowBlock) {
      const A d = A(to_acc(row[c * D]) - m);
      se += double(exp(d));
      sx += double(d);
    }
    se = block_sum(se);
    sx = block_sum(sx);
    if (threadIdx.x != 0) continue;
    logsum[r] = A(::log(se));
    const int64_t t = target[r];
    if (t == ignore_index) {
      loss[r] = A(0);
    } else if (t < 0 || t >= C) {  // the caller checks targets; never read outside the row
      loss[r] = A(NAN);
    } else {
      const double log_se = ::log(se);
      double v = (1.0 - ls) * ((double(m) - double(to_acc(row[t * D]))) + log_se);
      if (ls > 0) v += ls * (log_se - sx / double(C));
      loss[r] = A(v);
    }
  }
}

// gx[c] = g * (exp(x[c] - max - logsum) - ls / C) - (c == t) * g * (1 - ls); 0 where ignored.
template <class T>
__global__ void ce_backward_kernel(T* gx, const acc_t<T>* grad_loss, int64_t gs0, int64_t gs1, const T* x,
                                   const int64_t* target, const acc_t<T>* logsum, int64_t N, int64_t C, int64_t D,
                                   int64_t ignore_index, double ls) {
  using A = acc_t<T>;
  const A off = A(ls / double(C)), hit = A(1.0 - ls);
  for (int64_t r = blockIdx.x; r < N * D; r += gridDim.x) {
    const int64_t n = r / D, d = r % D, t = target[r];
    const T* row = x + n * C * D + d;
    T* out = gx + n * C * D + d;
    if (t == ignore_index) {
      for (int64_t c = threadIdx.x; c < C; c += kRowBlock) out[c * D] = convert<T>(A(0));
      continue;
    }
    const A m = row_max(row, C, D), s = logsum[r], g = grad_loss[n * gs0 + d * gs1];
    for (int64_t c = threadIdx.x; c < C; c += kRowBlock) {
      A v = g * (exp(A(A(to_acc(row[c * D]) - m) - s)) - off);
      if (c == t) v -= g * hit;
      out[c * D] = convert<T>(v);
    }
  }
}

unsigned grid_for_rows(int64_t M) { return unsigned(std::min<int64_t>(std::max<int64_t>(M, 1), 1 << 20)); }

}  // namespace

void cross_entropy_forward(const Tensor& loss, const Tensor& logsum, const Tensor& logits, const Tensor& target,
                           int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits.size(0), C = logits.size(1), D = logits.size(2);
  if (N * D == 0) return;
  dispatch_floating<DeviceTypes>(logits.dtype(), "cross_entropy", [&]<class T>() {
    using A = acc_t<T>;
    ce_forward_kernel<T><<<grid_for_rows(N * D), kRowBlock, 0, stream()>>>(
        ptr<A>(loss), ptr<A>(logsum), ptr<const T>(logits), ptr<const int64_t>(target), N, C, D, ignore_index,
        label_smoothing);
    CUDA_CHECK_LAUNCH("cross_entropy");
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, const Tensor& logsum, int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits.size(0), C = logits.size(1), D = logits.size(2);
  if (N * D == 0 || C == 0) return;
  dispatch_floating<DeviceTypes>(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    using A = acc_t<T>;
    ce_backward_kernel<T><<<grid_for_rows(N * D), kRowBlock, 0, stream()>>>(
        ptr<T>(grad_logits), ptr<const A>(grad_loss), grad_loss.stride(0), grad_loss.stride(1), ptr<const T>(logits),
        ptr<const int64_t>(target), ptr<const A>(logsum), N, C, D, ignore_index, label_smoothing);
    CUDA_CHECK_LAUNCH("cross_entropy_backward");
  });
}

}  // namespace mdl::cuda
