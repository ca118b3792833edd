// softmax and log_softmax along any dim, forward and backward side by side: one block per row,
// max and sum of exponentials reduced across the block in acc_t (float for f16/bf16).
#include "cuda/kernels.cuh"
#include "cuda/rows.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

// y = softmax(x) or log_softmax(x); rows: (out, in).
template <class T>
__global__ void softmax_kernel(Rows<2> g, T* y, const T* x, bool log) {
  using A = acc_t<T>;
  for (int64_t m = blockIdx.x; m < g.M; m += gridDim.x) {
    int64_t off[2];
    g.row(m, off);
    A mx = -INFINITY;
    for (int64_t k = threadIdx.x; k < g.n; k += kRowBlock) {
      const A v = to_acc(x[off[1] + k * g.rstride[1]]);
      mx = (v > mx || v != v) && mx == mx ? v : mx;
    }
    mx = block_max(mx);
    const A shift = mx == -INFINITY ? A(0) : mx;  // a row of -inf stays NaN-free in the max
    A sum = 0;
    for (int64_t k = threadIdx.x; k < g.n; k += kRowBlock) sum += exp(to_acc(x[off[1] + k * g.rstride[1]]) - shift);
    sum = block_sum(sum);
    const A lsum = ::log(sum);
    for (int64_t k = threadIdx.x; k < g.n; k += kRowBlock) {
      const A z = to_acc(x[off[1] + k * g.rstride[1]]) - shift;
      y[off[0] + k * g.rstride[0]] = convert<T>(log ? z - lsum : exp(z) / sum);
    }
  }
}

// softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g). rows: (gi, g, y).
template <class T>
__global__ void softmax_backward_kernel(Rows<3> r, T* gi, const T* g, const T* y, bool log) {
  using A = acc_t<T>;
  for (int64_t m = blockIdx.x; m < r.M; m += gridDim.x) {
    int64_t off[3];
    r.row(m, off);
    A acc = 0;
    for (int64_t k = threadIdx.x; k < r.n; k += kRowBlock) {
      const A gv = to_acc(g[off[1] + k * r.rstride[1]]);
      acc += log ? gv : gv * to_acc(y[off[2] + k * r.rstride[2]]);
    }
    acc = block_sum(acc);
    for (int64_t k = threadIdx.x; k < r.n; k += kRowBlock) {
      const A gv = to_acc(g[off[1] + k * r.rstride[1]]), yv = to_acc(y[off[2] + k * r.rstride[2]]);
      gi[off[0] + k * r.rstride[0]] = convert<T>(log ? gv - exp(yv) * acc : yv * (gv - acc));
    }
  }
}

unsigned grid_for_rows(int64_t M) { return unsigned(std::min<int64_t>(std::max<int64_t>(M, 1), 1 << 20)); }

}  // namespace

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  const int64_t d = in.dim() == 0 ? -1 : dim;
  const Rows<2> g = make_rows<2>("softmax", {&out, &in}, d);
  dispatch_floating<DeviceTypes>(in.dtype(), "softmax", [&]<class T>() {
    softmax_kernel<T><<<grid_for_rows(g.M), kRowBlock, 0, stream()>>>(g, ptr<T>(out), ptr<const T>(in), log);
    CUDA_CHECK_LAUNCH("softmax");
  });
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log) {
  if (grad_in.numel() == 0) return;
  const int64_t d = out.dim() == 0 ? -1 : dim;
  const Rows<3> r = make_rows<3>("softmax_backward", {&grad_in, &grad_out, &out}, d);
  dispatch_floating<DeviceTypes>(out.dtype(), "softmax_backward", [&]<class T>() {
    softmax_backward_kernel<T><<<grid_for_rows(r.M), kRowBlock, 0, stream()>>>(
        r, ptr<T>(grad_in), ptr<const T>(grad_out), ptr<const T>(out), log);
    CUDA_CHECK_LAUNCH("softmax_backward");
  });
}

}  // namespace mdl::cuda
