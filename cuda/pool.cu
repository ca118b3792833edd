// Pooling on the GPU (max, average, adaptive average), each forward beside its backward, with the
// windows, NaN rule and divisors of cpu/pool.cpp. Forwards run one thread per output;
// average backwards gather, one thread per input element adding its windows in the CPU's order;
// the max backward, which gets the winners but not the window geometry, walks each (n, c) plane
// in order on one thread. No atomics: results are deterministic, f16/bf16 sums run in float.
#include "cuda/kernels.cuh"
#include "kernels/pool_windows.h"
#include "cuda/common.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

// Element (n, c, h, w) of a 4-D tensor of any strides.
struct Strides4 {
  int64_t s0, s1, s2, s3;
  explicit Strides4(const Tensor& t) : s0(t.stride(0)), s1(t.stride(1)), s2(t.stride(2)), s3(t.stride(3)) {}
  __device__ int64_t at(int64_t n, int64_t c, int64_t h, int64_t w) const { return n * s0 + c * s1 + h * s2 + w * s3; }
};

// Output i of a contiguous (N, C, Ho, Wo) as (n, c, oh, ow).
struct Pos {
  int64_t n, c, h, w;
};
__device__ __forceinline__ Pos unflatten(int64_t i, int64_t C, int64_t H, int64_t W) {
  const int64_t w = i % W, h = i / W % H, c = i / (W * H) % C, n = i / (W * H * C);
  return {n, c, h, w};
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

template <class T>
__global__ void max_pool_kernel(T* out, int64_t* idx, const T* x, Strides4 xs, int64_t n, int64_t C, int64_t H,
                                int64_t W, int64_t Ho, int64_t Wo, kernels::Pool2dParams p) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const Pos o = unflatten(i, C, Ho, Wo);
    const PoolWindow wh = pool_window(o.h, p.stride_h, p.pad_h, p.kernel_h, H);
    const PoolWindow ww = pool_window(o.w, p.stride_w, p.pad_w, p.kernel_w, W);
    A best = -INFINITY;
    int64_t arg = wh.lo * W + ww.lo;
    for (int64_t h = wh.lo; h < wh.hi; ++h)
      for (int64_t w = ww.lo; w < ww.hi; ++w) {
        const A v = to_acc(x[xs.at(o.n, o.c, h, w)]);
        if (v > best || v != v) best = v, arg = h * W + w;  // NaN wins
      }
    out[i] = convert<T>(best);
    idx[i] = arg;
  }
}

// One thread per (n, c) plane: acc (N, C, H, W) contiguous, zeroed, += each output's gradient at
// its winner, outputs in row-major order.
template <class T>
__global__ void max_pool_backward_kernel(acc_t<T>* acc, const T* go, Strides4 gs, const int64_t* idx, Strides4 is,
                                         int64_t planes, int64_t C, int64_t HW, int64_t Ho, int64_t Wo) {
  GRID_STRIDE(q, planes) {
    const int64_t n = q / C, c = q % C;
    acc_t<T>* a = acc + q * HW;
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t j = idx[is.at(n, c, oh, ow)];
        if (j >= 0 && j < HW) a[j] += to_acc(go[gs.at(n, c, oh, ow)]);
      }
  }
}

template <class T>
__global__ void avg_pool_kernel(T* out, const T* x, Strides4 xs, int64_t n, int64_t C, int64_t H, int64_t W, int64_t Ho,
                                int64_t Wo, kernels::Pool2dParams p, bool count_include_pad) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const Pos o = unflatten(i, C, Ho, Wo);
    const PoolWindow wh = pool_window(o.h, p.stride_h, p.pad_h, p.kernel_h, H);
    const PoolWindow ww = pool_window(o.w, p.stride_w, p.pad_w, p.kernel_w, W);
    A s = 0;
    for (int64_t h = wh.lo; h < wh.hi; ++h)
      for (int64_t w = ww.lo; w < ww.hi; ++w) s += to_acc(x[xs.at(o.n, o.c, h, w)]);
    const int64_t div = count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo);
    out[i] = convert<T>(s / A(div));
  }
}

// gx (N, C, H, W) contiguous: each input adds g / div of every window holding it, (oh, ow) in order.
template <class T>
__global__ void avg_pool_backward_kernel(T* gx, const T* go, Strides4 gs, int64_t n, int64_t C, int64_t H, int64_t W,
                                         int64_t Ho, int64_t Wo, kernels::Pool2dParams p, bool count_include_pad) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const Pos x = unflatten(i, C, H, W);
    // Outputs o with o * stride - pad <= h < o * stride - pad + kernel.
    const int64_t oh0 = max(int64_t(0), (x.h + p.pad_h - p.kernel_h + p.stride_h) / p.stride_h);
    const int64_t oh1 = min(Ho - 1, (x.h + p.pad_h) / p.stride_h);
    const int64_t ow0 = max(int64_t(0), (x.w + p.pad_w - p.kernel_w + p.stride_w) / p.stride_w);
    const int64_t ow1 = min(Wo - 1, (x.w + p.pad_w) / p.stride_w);
    A s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const PoolWindow wh = pool_window(oh, p.stride_h, p.pad_h, p.kernel_h, H);
      if (x.h < wh.lo || x.h >= wh.hi) continue;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const PoolWindow ww = pool_window(ow, p.stride_w, p.pad_w, p.kernel_w, W);
        if (x.w < ww.lo || x.w >= ww.hi) continue;
        const int64_t div = count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo);
        s += to_acc(go[gs.at(x.n, x.c, oh, ow)]) / A(div);
      }
    }
    gx[i] = convert<T>(s);
  }
}

template <class T>
__global__ void adaptive_avg_kernel(T* out, const T* x, Strides4 xs, int64_t n, int64_t C, int64_t H, int64_t W,
                                    int64_t Ho, int64_t Wo) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const Pos o = unflatten(i, C, Ho, Wo);
    const PoolWindow wh = adaptive_window(o.h, Ho, H), ww = adaptive_window(o.w, Wo, W);
    A s = 0;
    for (int64_t h = wh.lo; h < wh.hi; ++h)
      for (int64_t w = ww.lo; w < ww.hi; ++w) s += to_acc(x[xs.at(o.n, o.c, h, w)]);
    out[i] = convert<T>(s / A(wh.padded * ww.padded));
  }
}

// Cells whose adaptive window holds h lie in [floor(h n / size), ceil((h + 1) n / size)).
template <class T>
__global__ void adaptive_avg_backward_kernel(T* gx, const T* go, Strides4 gs, int64_t n, int64_t C, int64_t H,
                                             int64_t W, int64_t Ho, int64_t Wo) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const Pos x = unflatten(i, C, H, W);
    const int64_t oh0 = x.h * Ho / H, oh1 = min(Ho, ((x.h + 1) * Ho + H - 1) / H);
    const int64_t ow0 = x.w * Wo / W, ow1 = min(Wo, ((x.w + 1) * Wo + W - 1) / W);
    A s = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const PoolWindow wh = adaptive_window(oh, Ho, H);
      if (x.h < wh.lo || x.h >= wh.hi) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const PoolWindow ww = adaptive_window(ow, Wo, W);
        if (x.w < ww.lo || x.w >= ww.hi) continue;
        s += to_acc(go[gs.at(x.n, x.c, oh, ow)]) / A(wh.padded * ww.padded);
      }
    }
    gx[i] = convert<T>(s);
  }
}

#undef GRID_STRIDE

}  // namespace

void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& x, const kernels::Pool2dParams& p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating<DeviceTypes>(x.dtype(), "max_pool2d", [&]<class T>() {
    max_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<int64_t>(indices), ptr<const T>(x),
                                                                 Strides4(x), n, x.size(1), x.size(2), x.size(3),
                                                                 out.size(2), out.size(3), p);
    CUDA_CHECK_LAUNCH("max_pool2d");
  });
}

void max_pool2d_backward(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices) {
  if (grad_x.numel() == 0) return;
  const int64_t C = grad_x.size(1), HW = grad_x.size(2) * grad_x.size(3), planes = grad_x.size(0) * C;
  dispatch_floating<DeviceTypes>(grad_x.dtype(), "max_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    constexpr bool kInPlace = std::is_same_v<T, A>;
    const Tensor acc = kInPlace ? grad_x : make_tensor(grad_x.shape(), kF32, grad_x.device());
    cuda::fill(acc, 0.0);
    if (grad_out.numel() > 0) {
      max_pool_backward_kernel<T><<<blocks_for(planes, 64), 64, 0, stream()>>>(
          ptr<A>(acc), ptr<const T>(grad_out), Strides4(grad_out), ptr<const int64_t>(indices), Strides4(indices),
          planes, C, HW, grad_out.size(2), grad_out.size(3));
      CUDA_CHECK_LAUNCH("max_pool2d_backward");
    }
    if constexpr (!kInPlace) cuda::copy(grad_x, acc);  // one rounding
  });
}

void avg_pool2d_forward(const Tensor& out, const Tensor& x, const kernels::Pool2dParams& p, bool count_include_pad) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating<DeviceTypes>(x.dtype(), "avg_pool2d", [&]<class T>() {
    avg_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<const T>(x), Strides4(x), n,
                                                                 x.size(1), x.size(2), x.size(3), out.size(2),
                                                                 out.size(3), p, count_include_pad);
    CUDA_CHECK_LAUNCH("avg_pool2d");
  });
}

void avg_pool2d_backward(const Tensor& grad_x, const Tensor& grad_out, const kernels::Pool2dParams& p,
                         bool count_include_pad) {
  const int64_t n = grad_x.numel();
  if (n == 0) return;
  dispatch_floating<DeviceTypes>(grad_x.dtype(), "avg_pool2d_backward", [&]<class T>() {
    avg_pool_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(
        ptr<T>(grad_x), ptr<const T>(grad_out), Strides4(grad_out), n, grad_x.size(1), grad_x.size(2), grad_x.size(3),
        grad_out.size(2), grad_out.size(3), p, count_include_pad);
    CUDA_CHECK_LAUNCH("avg_pool2d_backward");
  });
}

void adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& x) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating<DeviceTypes>(x.dtype(), "adaptive_avg_pool2d", [&]<class T>() {
    adaptive_avg_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(
        ptr<T>(out), ptr<const T>(x), Strides4(x), n, x.size(1), x.size(2), x.size(3), out.size(2), out.size(3));
    CUDA_CHECK_LAUNCH("adaptive_avg_pool2d");
  });
}

void adaptive_avg_pool2d_backward(const Tensor& grad_x, const Tensor& grad_out) {
  const int64_t n = grad_x.numel();
  if (n == 0) return;
  dispatch_floating<DeviceTypes>(grad_x.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>() {
    adaptive_avg_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(
        ptr<T>(grad_x), ptr<const T>(grad_out), Strides4(grad_out), n, grad_x.size(1), grad_x.size(2), grad_x.size(3),
        grad_out.size(2), grad_out.size(3));
    CUDA_CHECK_LAUNCH("adaptive_avg_pool2d_backward");
  });
}

}  // namespace mdl::cuda
