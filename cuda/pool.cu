// Pooling on the GPU (max, average, adaptive average), each forward beside its backward, with the
// windows, NaN rule and divisors of cpu/pool.cpp. Forwards run one thread per output: over
// (n, c, oh, ow) for inputs of any strides, or, where the channels are unit-strided (channels-last),
// over (n, oh, ow, c) with c fastest, so that a warp reads a pixel's neighbouring channels, a
// 16-byte vector of them per thread where C and the alignment allow. The channels-last kernels
// write through the outputs' strides (16-byte stores into a channels-last output); the others
// write the contiguous (N, C, Ho, Wo) outputs nn/functional_pool.cpp allocates. Average backwards
// gather, one thread per input element adding its windows in the CPU's order; the max backward,
// which gets the winners but not the window geometry, gathers too: a block bounds the windows by
// the winners, then each thread sums, for one input element, the gradients of the outputs that
// picked it in (oh, ow) order, the CPU's order. No atomics: results are deterministic, f16/bf16
// sums run in float. The window and gather logic lives in kernels/pool_windows.h, where tests run
// it on the CPU.
#include "cuda/common.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "kernels/pool_windows.h"

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
// its winner, outputs in row-major order. Taken only where a plane's lines of outputs are too many
// for the gather kernel's shared memory.
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

// V channels [c, c + V) at (n, c, h, w), as floats for f16/bf16: one 16-byte load when V > 1
// (pool_channel_vector has checked the alignment).
template <class T, int V>
struct ChannelLoad {
  const T* x;
  Strides4 xs;
  int64_t n, c;
  __device__ __forceinline__ void operator()(int64_t h, int64_t w, acc_t<T> (&v)[V]) const {
    const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(x + xs.at(n, c, h, w));
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = to_acc(p.v[k]);
  }
};

// Writes V channels [c, c + V) at (n, c, h, w): one 16-byte store when vec, else V stores
// through the strides (an (N, C, H, W) output, for one).
template <class T, int V>
__device__ __forceinline__ void store_channels(T* out, const Strides4& os, bool vec, int64_t n, int64_t c, int64_t h,
                                               int64_t w, const acc_t<T> (&v)[V]) {
  if constexpr (V > 1) {
    if (vec) {
      static_assert(sizeof(Pack<T, V>) == sizeof(uint4));
      Pack<T, V> p;
#pragma unroll
      for (int k = 0; k < V; ++k) p.v[k] = convert<T>(v[k]);
      // One 16-byte store: a plain assignment of the Pack is split into element stores.
      __stwb(reinterpret_cast<uint4*>(out + os.at(n, c, h, w)), *reinterpret_cast<const uint4*>(&p));
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) out[os.at(n, c + k, h, w)] = convert<T>(v[k]);
}

// Channels-last max pool: x (N, C, H, W) with unit channel stride. n = N * Ho * Wo * C / V
// threads; thread i takes output pixel (n, oh, ow) and channels [c, c + V), channels fastest.
// out and idx take any strides (vec_out: out takes a 16-byte store of V channels).
template <class T, int V>
__global__ void max_pool_nhwc_kernel(T* out, Strides4 os, bool vec_out, int64_t* idx, Strides4 is, const T* x,
                                     Strides4 xs, int64_t n, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                                     kernels::Pool2dParams p) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const PoolPos o = pool_pos_channels_last(i, C / V, Ho, Wo);  // o.c counts vectors
    const int64_t c = o.c * V;
    const PoolWindow wh = pool_window(o.h, p.stride_h, p.pad_h, p.kernel_h, H);
    const PoolWindow ww = pool_window(o.w, p.stride_w, p.pad_w, p.kernel_w, W);
    A best[V];
    int64_t arg[V];
    max_pool_window<A, V>(wh, ww, W, ChannelLoad<T, V>{x, xs, o.n, c}, best, arg);
    store_channels<T, V>(out, os, vec_out, o.n, c, o.h, o.w, best);
#pragma unroll
    for (int k = 0; k < V; ++k) idx[is.at(o.n, c + k, o.h, o.w)] = arg[k];
  }
}

// Channels-last average pool; the threads of max_pool_nhwc_kernel.
template <class T, int V>
__global__ void avg_pool_nhwc_kernel(T* out, Strides4 os, bool vec_out, const T* x, Strides4 xs, int64_t n, int64_t C,
                                     int64_t H, int64_t W, int64_t Ho, int64_t Wo, kernels::Pool2dParams p,
                                     bool count_include_pad) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const PoolPos o = pool_pos_channels_last(i, C / V, Ho, Wo);
    const int64_t c = o.c * V;
    const PoolWindow wh = pool_window(o.h, p.stride_h, p.pad_h, p.kernel_h, H);
    const PoolWindow ww = pool_window(o.w, p.stride_w, p.pad_w, p.kernel_w, W);
    A s[V];
    sum_pool_window<A, V>(wh, ww, ChannelLoad<T, V>{x, xs, o.n, c}, s);
    const A div = A(pool_divisor(wh, ww, count_include_pad));
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] = s[k] / div;
    store_channels<T, V>(out, os, vec_out, o.n, c, o.h, o.w, s);
  }
}

// Channels-last adaptive average pool; the threads of max_pool_nhwc_kernel.
template <class T, int V>
__global__ void adaptive_avg_nhwc_kernel(T* out, Strides4 os, bool vec_out, const T* x, Strides4 xs, int64_t n,
                                         int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  using A = acc_t<T>;
  GRID_STRIDE(i, n) {
    const PoolPos o = pool_pos_channels_last(i, C / V, Ho, Wo);
    const int64_t c = o.c * V;
    const PoolWindow wh = adaptive_window(o.h, Ho, H), ww = adaptive_window(o.w, Wo, W);
    A s[V];
    sum_pool_window<A, V>(wh, ww, ChannelLoad<T, V>{x, xs, o.n, c}, s);
    const A div = A(wh.padded * ww.padded);
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] = s[k] / div;
    store_channels<T, V>(out, os, vec_out, o.n, c, o.h, o.w, s);
  }
}

// The gather block's threads; at least four warps (the four span scans run on one thread of each).
constexpr int kGatherThreads = 256;

// Max pool backward, gathered: gx (N, C, H, W), any strides. Block b takes g <= G planes of one
// sample (channels c0.., max_pool_gather_group) and writes every gradient element of them once.
// The window geometry is not passed, so the block first bounds the windows by the winners
// (kernels/pool_windows.h): a warp per line of outputs finds the span its winners lie in, one
// thread per array makes the spans monotone; then each thread takes input elements
// (max_pool_gather_pos), visits the outputs of the lines holding the element and sums the
// gradients of those that picked it, in (oh, ow) order, rounding once. cl: the planes are walked
// channels-last (the indices are, so a warp reads neighbouring channels).
// Shared memory: row_lo, row_hi (Ho each), col_lo, col_hi (Wo each), int32.
template <class T>
__global__ void max_pool_backward_gather_kernel(T* gx, Strides4 xs, const T* go, Strides4 gs, const int64_t* idx,
                                                Strides4 is, int64_t C, int64_t G, int64_t H, int64_t W, int64_t Ho,
                                                int64_t Wo, bool cl) {
  extern __shared__ int32_t spans[];
  int32_t *row_lo = spans, *row_hi = row_lo + Ho, *col_lo = row_hi + Ho, *col_hi = col_lo + Wo;
  const int64_t groups = (C + G - 1) / G, n = blockIdx.x / groups, c0 = blockIdx.x % groups * G;
  const int64_t g = min(G, C - c0);
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), warps = int(blockDim.x / 32);
  const auto winner_of = [&](int64_t c, int64_t oh, int64_t ow) { return idx[is.at(n, c, oh, ow)]; };
  for (int64_t r = warp; r < Ho + Wo; r += warps) {  // the same lines for the warp's 32 lanes
    int32_t lo, hi;
    max_pool_line_span(r, lane, 32, c0, g, H, W, Ho, Wo, cl, winner_of, lo, hi);
    for (int d = 16; d > 0; d /= 2) {
      lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, d));
      hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, d));
    }
    if (lane == 0) {
      if (r < Ho) row_lo[r] = lo, row_hi[r] = hi;
      else col_lo[r - Ho] = lo, col_hi[r - Ho] = hi;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) pool_running_min_from_end(row_lo, Ho);
  else if (threadIdx.x == 32) pool_running_max(row_hi, Ho);
  else if (threadIdx.x == 64) pool_running_min_from_end(col_lo, Wo);
  else if (threadIdx.x == 96) pool_running_max(col_hi, Wo);
  __syncthreads();
  for (int64_t e = threadIdx.x; e < g * H * W; e += blockDim.x) {
    const PoolPos x = max_pool_gather_pos(e, n, c0, g, H, W, cl);
    const PoolLines rows = pool_lines_holding(row_lo, row_hi, Ho, x.h);
    const PoolLines cols = pool_lines_holding(col_lo, col_hi, Wo, x.w);
    const auto winner = [&](int64_t oh, int64_t ow) { return idx[is.at(x.n, x.c, oh, ow)]; };
    const auto grad = [&](int64_t oh, int64_t ow) { return to_acc(go[gs.at(x.n, x.c, oh, ow)]); };
    gx[xs.at(x.n, x.c, x.h, x.w)] = convert<T>(max_pool_gather<acc_t<T>>(x.h * W + x.w, rows, cols, winner, grad));
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

// Whether a kernel walks t channels-last: its channels unit-strided, more than one of them.
bool channels_fastest(const Tensor& t) { return t.size(1) > 1 && t.stride(1) == 1; }

// pool_channel_vector for t's geometry and address.
int64_t channel_vector(const Tensor& t) {
  const int64_t size[4] = {t.size(0), t.size(1), t.size(2), t.size(3)};
  const int64_t stride[4] = {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
  return pool_channel_vector(size, stride, int64_t(t.element_size()), reinterpret_cast<uintptr_t>(t.raw_data()));
}

// Calls f.template operator()<V>(vec_out) with V the channel vector of T that x allows (else 1),
// vec_out whether out takes the same vector.
template <class T, class F>
void with_channel_vector(const Tensor& x, const Tensor& out, const F& f) {
  constexpr int kV = int(16 / sizeof(T));
  if (channel_vector(x) == kV) f.template operator()<kV>(channel_vector(out) == kV);
  else f.template operator()<1>(false);
}

}  // namespace

void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& x, const kernels::Pool2dParams& p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  dispatch_floating<DeviceTypes>(x.dtype(), "max_pool2d", [&]<class T>() {
    if (channels_fastest(x)) {
      with_channel_vector<T>(x, out, [&]<int V>(bool vec_out) {
        max_pool_nhwc_kernel<T, V><<<blocks_for(n / V), kThreads, 0, stream()>>>(
            ptr<T>(out), Strides4(out), vec_out, ptr<int64_t>(indices), Strides4(indices), ptr<const T>(x), Strides4(x),
            n / V, C, H, W, Ho, Wo, p);
      });
    } else {
      max_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<int64_t>(indices), ptr<const T>(x),
                                                                   Strides4(x), n, C, H, W, Ho, Wo, p);
    }
    CUDA_CHECK_LAUNCH("max_pool2d");
  });
}

void max_pool2d_backward(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices) {
  if (grad_x.numel() == 0) return;
  const int64_t N = grad_x.size(0), C = grad_x.size(1), H = grad_x.size(2), W = grad_x.size(3);
  const int64_t Ho = grad_out.size(2), Wo = grad_out.size(3);
  const bool cl = channels_fastest(indices);
  const int64_t G = max_pool_gather_group(C, H * W, cl, kGatherThreads), blocks = N * ((C + G - 1) / G);
  const size_t shared = size_t(Ho + Wo) * 2 * sizeof(int32_t);
  dispatch_floating<DeviceTypes>(grad_x.dtype(), "max_pool2d_backward", [&]<class T>() {
    if (shared <= 48 * 1024 && blocks <= INT32_MAX) {
      max_pool_backward_gather_kernel<T><<<unsigned(blocks), kGatherThreads, shared, stream()>>>(
          ptr<T>(grad_x), Strides4(grad_x), ptr<const T>(grad_out), Strides4(grad_out), ptr<const int64_t>(indices),
          Strides4(indices), C, G, H, W, Ho, Wo, cl);
      CUDA_CHECK_LAUNCH("max_pool2d_backward");
      return;
    }
    using A = acc_t<T>;
    constexpr bool kInPlace = std::is_same_v<T, A>;
    const bool in_place = kInPlace && grad_x.is_contiguous();
    const Tensor acc = in_place ? grad_x
                                : make_tensor(grad_x.shape(), kInPlace ? grad_x.dtype() : kF32, grad_x.device());
    cuda::fill(acc, 0.0);
    if (grad_out.numel() > 0) {
      const int64_t planes = N * C;
      max_pool_backward_kernel<T><<<blocks_for(planes, 64), 64, 0, stream()>>>(
          ptr<A>(acc), ptr<const T>(grad_out), Strides4(grad_out), ptr<const int64_t>(indices), Strides4(indices),
          planes, C, H * W, Ho, Wo);
      CUDA_CHECK_LAUNCH("max_pool2d_backward");
    }
    if (!in_place) cuda::copy(grad_x, acc);  // one rounding
  });
}

void avg_pool2d_forward(const Tensor& out, const Tensor& x, const kernels::Pool2dParams& p, bool count_include_pad) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  dispatch_floating<DeviceTypes>(x.dtype(), "avg_pool2d", [&]<class T>() {
    if (channels_fastest(x)) {
      with_channel_vector<T>(x, out, [&]<int V>(bool vec_out) {
        avg_pool_nhwc_kernel<T, V><<<blocks_for(n / V), kThreads, 0, stream()>>>(ptr<T>(out), Strides4(out), vec_out,
                                                                                 ptr<const T>(x), Strides4(x), n / V, C,
                                                                                 H, W, Ho, Wo, p, count_include_pad);
      });
    } else {
      avg_pool_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<const T>(x), Strides4(x), n, C, H,
                                                                   W, Ho, Wo, p, count_include_pad);
    }
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
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  dispatch_floating<DeviceTypes>(x.dtype(), "adaptive_avg_pool2d", [&]<class T>() {
    if (channels_fastest(x)) {
      with_channel_vector<T>(x, out, [&]<int V>(bool vec_out) {
        adaptive_avg_nhwc_kernel<T, V><<<blocks_for(n / V), kThreads, 0, stream()>>>(
            ptr<T>(out), Strides4(out), vec_out, ptr<const T>(x), Strides4(x), n / V, C, H, W, Ho, Wo);
      });
    } else {
      adaptive_avg_kernel<T>
          <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<const T>(x), Strides4(x), n, C, H, W, Ho, Wo);
    }
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
