// Batch norm and group norm (layer norm is its one-group case) on the GPU, each forward beside its
// backward, with the arithmetic of cpu/norm.cpp: statistics in double (batch norm's from sums of
// each value less its channel's first value; group norm's in two passes), per-channel or per-row
// coefficients rounded to the stat type A, then y = x * a + b elementwise (16 bytes per thread
// where a thread's elements share a channel or are consecutive channels). Batch norm spreads each
// channel over several blocks (for rows of channels, S == 1, each block 32 channels), and with
// batch_norm_packed_stats keeps four 16-byte loads per thread in flight in its statistics passes;
// group norm takes one block per (n, group) row, and its parameter gradients one block per channel.
#include <initializer_list>
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.cuh"
#include "cuda/rows.cuh"
#include "kernels/channel_split.h"
#include "kernels/norm_math.h"
#include "switches/list/toggles.h"

namespace mdl::cuda {

using namespace detail;

namespace {

namespace norm_math = kernels::norm_math;
using norm_math::activate;
using norm_math::plus_residual;
using norm_math::pre_activation;
using norm_math::relu_gate;
using norm_math::with_relu;

template <class A>
__device__ __forceinline__ A param_or(const A* p, int64_t c, A fallback) {
  return p ? p[c] : fallback;
}

// The forward's per-channel coefficients (kernels/norm_math.h) from what it read: mean and invstd
// (C), weight and bias (C) or null.
template <class A>
struct ChannelAffine {
  const A *mean, *invstd, *w, *b;
  __device__ __forceinline__ norm_math::Affine<A> operator()(int64_t c) const {
    return norm_math::affine(param_or(w, c, A(1)), param_or(b, c, A(0)), mean[c], invstd[c]);
  }
};

// gy gated by the forward's ReLU at x (channel coefficients kc) when RELU, in A.
template <bool RELU, class A>
__device__ __forceinline__ A gated(A g, A x, const norm_math::Affine<A>& kc) {
  return relu_gate<RELU>(g, RELU ? pre_activation(x, kc) : A(0));
}

// gx = g * p + x * q + r with its roundings written out, fma(g, p, fma(x, q, r)): nvcc contracts a
// plain expression to FMAs as it sees fit, and differently in the kernels with and without the
// ReLU gate, which must give the same bits as a ReLU's backward followed by the plain kernel.
template <class A>
__device__ __forceinline__ A grad_x_value(A g, A x, A p, A q, A r) {
  if constexpr (std::is_same_v<A, double>) return __fma_rn(g, p, __fma_rn(x, q, r));
  else return __fmaf_rn(g, p, __fmaf_rn(x, q, r));
}

unsigned grid_for(int64_t blocks) { return unsigned(std::min<int64_t>(std::max<int64_t>(blocks, 1), 1 << 20)); }

// ---- batch norm: x (N, C, S) ------------------------------------------------------------------
// Each channel's M = N * S values are split over P blocks (kernels/channel_split.h) so a few wide
// channels still fill the GPU. Block (c, p) writes its partial sums to part (2, P, C), in double,
// and counts itself done on its channel's counter (the CUDA context's, left at zero by the last
// block of each kernel, so no memset comes first); the last of the P blocks to finish adds the P
// partials in order (the same order whichever block is last, so results do not depend on timing)
// and finishes the channel: statistics and running statistics in the forward, parameter gradients
// and grad_x's coefficients in the backward. So each direction is two launches, this one and the
// elementwise pass. Per-element channel indices use 32-bit division where the tensor allows it.

// About this many blocks per statistics pass, each thread with at least 4 values.
constexpr int64_t kStatBlocks = 1024;

// The vectors (or rows) a thread of a packed statistics pass (batch_norm_packed_stats) loads before
// it sums any.
constexpr int kPackRound = 4;

// Whether this block is the last of the P blocks counting on counters[slot] to get here, every
// thread having written its partials before (each thread's fence makes its stores visible to the
// device before the count). The last block reads the others' partials through L2 (__ldcg), and
// sets the counter back to zero for the next kernel (detail::block_counters).
__device__ __forceinline__ bool last_to_finish(unsigned* counters, int64_t slot, unsigned P) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const bool l = atomicAdd(counters + slot, 1u) + 1 == P;
    if (l) {
      __threadfence();
      counters[slot] = 0;
    }
    last = l;
  }
  __syncthreads();
  return last;
}

// The block's sums of (a, b), added across its threads in a fixed order, to part (2, P, C) at
// piece p of channel c.
__device__ __forceinline__ void write_block_partials(double a, double b, double* part, int64_t p, int64_t P, int64_t C,
                                                     int64_t c) {
  a = block_sum(a);
  b = block_sum(b);
  if (threadIdx.x == 0) {
    part[p * C + c] = a;
    part[(P + p) * C + c] = b;
  }
}

// Channel c's sums (a, b) over its P partials in part (2, P, C), added in order.
__device__ __forceinline__ void channel_totals(const double* part, int64_t P, int64_t C, int64_t c, double& a,
                                               double& b) {
  a = 0, b = 0;
  for (int64_t p = 0; p < P; ++p) a += __ldcg(part + p * C + c), b += __ldcg(part + (P + p) * C + c);
}

// Where the forward's statistics go: mean, var (biased), invstd (C); the running statistics
// (null: none) with their blend factors (kernels/norm.h).
template <class A>
struct StatsOut {
  A *mean, *var, *invstd, *rm, *rv;
  A keep, take, take_var;
  double eps;
};

// Channel c's statistics from its partials of d = x - shift over M values.
template <class A>
__device__ void finish_channel_stats(const double* part, int64_t P, int64_t C, int64_t c, double shift, int64_t M,
                                     const StatsOut<A>& o) {
  double s1, s2;
  channel_totals(part, P, C, c, s1, s2);
  // Clamped at 0 by a comparison, which keeps a NaN (fmax(NaN, 0) is 0): an inf or NaN input gives
  // a NaN variance, as the CPU's.
  const double md = s1 / double(M), e = s2 / double(M) - md * md, v = e < 0.0 ? 0.0 : e;
  const A m = A(shift + md), va = A(v);
  o.mean[c] = m;
  o.var[c] = va;
  o.invstd[c] = A(norm_math::inv_std(v, o.eps));
  if (o.rm) {
    o.rm[c] = o.rm[c] * o.keep + m * o.take;
    o.rv[c] = o.rv[c] * o.keep + va * o.take_var;
  }
}

// The statistics passes' walk over a piece of channel c and their sums, one vector of V values at a
// time, or with PACKED (the batch_norm_packed_stats switch) two changes. Each thread loads
// kPackRound vectors (of each operand) before it uses any, so four 16-byte loads per thread are in
// flight instead of one. And each vector's V values are summed in PackSum before the sum joins the
// thread's double totals: f32 for f16, whose values (|x| <= 65504) and their squared differences
// f32 holds to far below their own rounding, so a vector costs 2 conversions to double instead of
// 2 * V (a slow instruction); double for bf16, whose range is f32's (a difference past 1.8e19 would
// square to inf in f32), f32 and f64.
template <class T>
using PackSum = std::conditional_t<std::is_same_v<T, __half>, float, double>;

__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

// sum(av, bv) on the vectors of a, and of b when TWO, at the walk positions j0 + threadIdx.x,
// j0 + threadIdx.x + kRowBlock, ... < j1 of channel c (vectors of V values, S % V == 0), in that
// order, ROUND loads of each operand issued before the first of them is summed.
template <int V, int ROUND, bool TWO, class T, class F>
__device__ __forceinline__ void for_each_vector(const T* a, const T* b, int64_t j0, int64_t j1, int64_t S, int64_t C,
                                                int64_t c, F&& sum) {
  using Vec = Pack<T, V>;
  int64_t j = j0 + threadIdx.x;
  if (j >= j1) return;
  ChannelWalk w(j, kRowBlock, S / V, C, c);
  for (; j + (ROUND - 1) * kRowBlock < j1; j += ROUND * kRowBlock) {
    Vec av[ROUND], bv[ROUND]{};
#pragma unroll
    for (int u = 0; u < ROUND; ++u, w.advance()) {
      av[u] = reinterpret_cast<const Vec*>(a)[w.offset()];
      if constexpr (TWO) bv[u] = reinterpret_cast<const Vec*>(b)[w.offset()];
    }
#pragma unroll
    for (int u = 0; u < ROUND; ++u) sum(av[u], bv[u]);
  }
  for (; j < j1; j += kRowBlock, w.advance()) {
    Vec bv{};
    if constexpr (TWO) bv = reinterpret_cast<const Vec*>(b)[w.offset()];
    sum(reinterpret_cast<const Vec*>(a)[w.offset()], bv);
  }
}

// Block (c, p): the sums of d = x - shift and d * d over piece p of channel c, shift being the
// channel's first value (it centres the sums, so the variance below does not cancel). V elements
// per load: positions, piece and the walk count vectors of V values of one channel (S % V == 0).
template <class T, int V, bool PACKED>
__global__ void bn_partial_stats_kernel(const T* x, int64_t C, int64_t S, int64_t M, int64_t piece, double* part,
                                        unsigned* done, StatsOut<acc_t<T>> o) {
  using Sum = PackSum<T>;
  const int64_t c = blockIdx.x, p = blockIdx.y, P = gridDim.y, Mv = M / V;
  const int64_t j0 = p * piece, j1 = j0 + piece < Mv ? j0 + piece : Mv;
  const double shift = double(to_acc(x[c * S]));
  double s1 = 0, s2 = 0;
  for_each_vector<V, PACKED ? kPackRound : 1, false>(x, x, j0, j1, S, C, c,
                                                     [&](const Pack<T, V>& xv, const Pack<T, V>&) {
                                                       if constexpr (PACKED) {
                                                         Sum a = 0, b = 0;
#pragma unroll
                                                         for (int e = 0; e < V; ++e) {
                                                           const Sum d = Sum(to_acc(xv.v[e])) - Sum(shift);
                                                           a += d;
                                                           b = fma_rn(d, d, b);
                                                         }
                                                         s1 += double(a);
                                                         s2 += double(b);
                                                       } else {
#pragma unroll
                                                         for (int e = 0; e < V; ++e) {
                                                           const double d = double(to_acc(xv.v[e])) - shift;
                                                           s1 += d;
                                                           s2 += d * d;
                                                         }
                                                       }
                                                     });
  write_block_partials(s1, s2, part, p, P, C, c);
  if (last_to_finish(done, c, unsigned(P)) && threadIdx.x == 0) finish_channel_stats(part, P, C, c, shift, M, o);
}

// ---- batch norm over rows: S == 1, x (M, C) ----------------------------------------------------
// A channels-last activation (nn/functional_norm.cpp reads it as (N*H*W, C, 1)) or an (N, C) input:
// channel c's values lie C apart, so the walk above would read one value per 32-byte sector. Here
// a block of (32, kRowThreads) threads covers 32 consecutive channels: thread (tx, ty) sums channel
// 32 * blockIdx.x + tx over rows ty, ty + kRowThreads, ... of its piece, each warp reading 32
// neighbouring values of one row; the kRowThreads partial sums are added in order, and the
// partials go to the same (2, P, C) layout, the counters being one per group of 32 channels.
constexpr int kRowThreads = 8;

// Adds the kRowThreads partial sums (a, b) of each of the block's 32 channels, in order, and writes
// channel c's totals to part (2, P, C) at piece blockIdx.y.
__device__ __forceinline__ void write_row_partials(double a, double b, int64_t c, int64_t C, double* part) {
  __shared__ double sum1[kRowThreads][32], sum2[kRowThreads][32];
  sum1[threadIdx.y][threadIdx.x] = a;
  sum2[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  for (int r = 1; r < kRowThreads; ++r) a += sum1[r][threadIdx.x], b += sum2[r][threadIdx.x];
  part[blockIdx.y * C + c] = a;
  part[(gridDim.y + blockIdx.y) * C + c] = b;
}

template <class T>
__global__ void bn_rows_partial_stats_kernel(const T* x, int64_t C, int64_t M, int64_t piece, double* part,
                                             unsigned* done, StatsOut<acc_t<T>> o) {
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x, j0 = blockIdx.y * piece;
  const int64_t j1 = j0 + piece < M ? j0 + piece : M;
  const double shift = c < C ? double(to_acc(x[c])) : 0.0;
  double s1 = 0, s2 = 0;
  if (c < C) {
    for (int64_t j = j0 + threadIdx.y; j < j1; j += kRowThreads) {
      const double d = double(to_acc(x[j * C + c])) - shift;
      s1 += d;
      s2 += d * d;
    }
  }
  write_row_partials(s1, s2, c, C, part);
  if (last_to_finish(done, blockIdx.x, gridDim.y) && threadIdx.y == 0 && c < C)
    finish_channel_stats(part, gridDim.y, C, c, shift, M, o);
}

// Where the backward's per-channel results go (null: not asked): grad_w, grad_b (C) and the
// coefficients of gx = gy * p + x * q + r in coef (3, C).
template <class A>
struct GradOut {
  A *grad_w, *grad_b, *coef;
  bool training;
};

// Channel c's results from its partials of sdy = sum gy and sdx = sum gy * (x - mean) over M values.
template <class A>
__device__ void finish_channel_grad(const double* part, int64_t P, int64_t C, int64_t c, int64_t M,
                                    const ChannelAffine<A>& k, const GradOut<A>& o) {
  double sdy, sdx;
  channel_totals(part, P, C, c, sdy, sdx);
  const double is = double(k.invstd[c]), mu = double(k.mean[c]);
  if (o.grad_w) o.grad_w[c] = A(sdx * is);
  if (o.grad_b) o.grad_b[c] = A(sdy);
  if (!o.coef) return;
  const double a = double(param_or(k.w, c, A(1))) * is;
  A q = 0, r = 0;
  if (o.training) {
    const double kk = a * is * is * sdx / double(M);  // a * invstd * mean(gy * xhat)
    q = A(-kk);
    r = A(kk * mu - a * sdy / double(M));
  }
  o.coef[c] = A(a);
  o.coef[C + c] = q;
  o.coef[2 * C + c] = r;
}

// Thread c, where no block summed anything (M == 0): the same results from no partials.
template <class A>
__global__ void bn_empty_grad_kernel(int64_t C, ChannelAffine<A> k, GradOut<A> o) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C; c += int64_t(gridDim.x) * blockDim.x)
    finish_channel_grad(nullptr, 0, C, c, 0, k, o);
}

template <class T, bool RELU>
__global__ void bn_rows_partial_grad_kernel(const T* gy, const T* x, int64_t C, int64_t M, int64_t piece,
                                            ChannelAffine<acc_t<T>> k, double* part, unsigned* done,
                                            GradOut<acc_t<T>> o) {
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x, j0 = blockIdx.y * piece;
  const int64_t j1 = j0 + piece < M ? j0 + piece : M;
  double sdy = 0, sdx = 0;
  if (c < C) {
    const double mu = double(k.mean[c]);
    const auto kc = RELU ? k(c) : norm_math::Affine<acc_t<T>>{};
    for (int64_t j = j0 + threadIdx.y; j < j1; j += kRowThreads) {
      const auto xa = to_acc(x[j * C + c]);
      const double g = double(gated<RELU>(to_acc(gy[j * C + c]), xa, kc));
      sdy += g;
      sdx = __fma_rn(g, double(xa) - mu, sdx);
    }
  }
  write_row_partials(sdy, sdx, c, C, part);
  if (last_to_finish(done, blockIdx.x, gridDim.y) && threadIdx.y == 0 && c < C)
    finish_channel_grad(part, gridDim.y, C, c, M, k, o);
}

// The statistics grid of x (N, C, S): (C, P) blocks of kRowBlock threads walking each channel's
// vectors of V values (V = 1, or S % V == 0 with 16-byte aligned operands), or for S == 1
// (ceil(C / 32), P) blocks of 32 x kRowThreads walking rows, or there, given a row_vector width,
// (groups, P) blocks of kRowBlock threads reading vectors of that many channels (row_vector_split).
// `slots` counters, one per channel or per block column.
struct StatGrid {
  bool rows, row_vectors;
  ChannelSplit sp;
  RowVectorSplit rs;
  dim3 grid, block;
  int64_t slots;
};
StatGrid stat_grid(int64_t M, int64_t C, int64_t S, int V, int row_vector = 0) {
  if (S == 1 && row_vector > 0) {
    const RowVectorSplit rs = row_vector_split(M, C, row_vector, kStatBlocks, kRowBlock, kPackRound);
    return {true, true, rs.sp, rs, dim3(unsigned(rs.groups), unsigned(rs.sp.P)), dim3(kRowBlock), rs.groups};
  }
  if (S == 1) {
    const int64_t groups = (C + 31) / 32;
    const ChannelSplit sp = channel_split(M, groups, kStatBlocks, 4 * kRowThreads);
    return {true, false, sp, {}, dim3(unsigned(groups), unsigned(sp.P)), dim3(32, kRowThreads), groups};
  }
  const ChannelSplit sp = vector_channel_split(M, C, V, kStatBlocks, kRowBlock);
  return {false, false, sp, {}, dim3(unsigned(C), unsigned(sp.P)), dim3(kRowBlock), C};
}

// n zero counters for the last-block hand-off: the context's (detail::block_counters, no memset),
// or where n is more than those a fresh allocation zeroed by a memset, held by `keep`.
unsigned* zeroed_counters(const char* op, int64_t n, Device d, Tensor& keep) {
  if (n <= kBlockCounters) return block_counters();
  keep = make_tensor({n}, kI32, d);
  CUDA_CHECK(op, cudaMemsetAsync(keep.raw_data(), 0, size_t(n) * sizeof(int32_t), stream()));
  return reinterpret_cast<unsigned*>(ptr<int32_t>(keep));
}

// Whether every operand starts on a 16-byte boundary, for the vector passes.
bool aligned16(std::initializer_list<const void*> data) {
  for (const void* p : data)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// The statistics pass reads V values per load where every operand allows it.
template <class T>
bool stat_vectors(int64_t S, std::initializer_list<const void*> data) {
  constexpr int V = int(16 / sizeof(T));
  return V > 1 && S % V == 0 && aligned16(data);
}

// Whether the statistics pass over rows of channels (S == 1) reads vectors of V channels: with
// batch_norm_packed_stats on, C % V == 0 and 16-byte aligned operands.
template <class T>
bool packed_rows(int64_t S, int64_t C, std::initializer_list<const void*> data) {
  constexpr int V = int(16 / sizeof(T));
  return S == 1 && toggles::batch_norm_packed_stats() && C % V == 0 && aligned16(data);
}

// The channel of flat element i of an (N, C, S) tensor; I is 32-bit where N * C * S fits.
template <class I>
__device__ __forceinline__ int64_t channel_of(int64_t i, int64_t C, int64_t S) {
  return int64_t((I(i) / I(S)) % I(C));
}

// y = activate((x - mean[c]) * a[c] + b[c] (+ r)) with a = w * invstd, in A as the CPU rounds it; RELU folds the ReLU in, RES the residual r before it.
template <class T, bool RELU, bool RES, class I>
__global__ void bn_apply_kernel(T* y, const T* x, const T* r, int64_t n, int64_t C, int64_t S,
                                ChannelAffine<acc_t<T>> k) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of<I>(i, C, S);
    const auto v = pre_activation(to_acc(x[i]), k(c));
    y[i] = convert<T>(activate<RELU>(plus_residual<RES>(v, RES ? to_acc(r[i]) : decltype(v)(0))));
  }
}

// The vector paths of the two elementwise passes (y = x * a + b, gx = gy * p + x * q + r): each
// thread takes V = 16 / sizeof(T) consecutive elements in one 16-byte load per operand. They lie in
// one channel where S % V == 0, and in V consecutive channels where S == 1 (a channels-last
// activation read as (N*H*W, C, 1)) and C % V == 0; the per-channel arithmetic is the scalar
// kernels', so the results are the same bits.
enum class ChannelRun { one_channel, consecutive_channels };

// Whether the vector path applies to (N, C, S) operands at these addresses, and which run it walks.
bool vector_channels(int64_t C, int64_t S, int V, std::initializer_list<const void*> data, ChannelRun& run) {
  if (!aligned16(data)) return false;
  if (S % V == 0) return run = ChannelRun::one_channel, true;
  if (S == 1 && C % V == 0) return run = ChannelRun::consecutive_channels, true;
  return false;
}

// y = activate((x - mean[c]) * a[c] + b[c] (+ r)) on V elements per thread; nv = n / V.
template <class T, bool RELU, bool RES, int V, ChannelRun R, class I>
__global__ void bn_apply_vec_kernel(T* y, const T* x, const T* r, int64_t nv, int64_t C, int64_t S,
                                    ChannelAffine<acc_t<T>> k) {
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += int64_t(gridDim.x) * blockDim.x) {
    const Pack<T, V> xv = reinterpret_cast<const Pack<T, V>*>(x)[v];
    Pack<T, V> rv;
    if constexpr (RES) rv = reinterpret_cast<const Pack<T, V>*>(r)[v];
    Pack<T, V> yv;
    const int64_t c0 = R == ChannelRun::one_channel ? channel_of<I>(v * V, C, S) : int64_t(I(v * V) % I(C));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t c = R == ChannelRun::one_channel ? c0 : c0 + j;
      const auto pre = pre_activation(to_acc(xv.v[j]), k(c));
      yv.v[j] = convert<T>(activate<RELU>(plus_residual<RES>(pre, RES ? to_acc(rv.v[j]) : decltype(pre)(0))));
    }
    reinterpret_cast<Pack<T, V>*>(y)[v] = yv;
  }
}

// Block (c, p): sdy = sum gy and sdx = sum gy * (x - mean) over piece p of channel c, gy gated;
// V values of gy and of x per load, as the statistics pass walks them.
template <class T, bool RELU, int V, bool PACKED>
__global__ void bn_partial_grad_kernel(const T* gy, const T* x, int64_t C, int64_t S, int64_t M, int64_t piece,
                                       ChannelAffine<acc_t<T>> k, double* part, unsigned* done, GradOut<acc_t<T>> o) {
  using Sum = PackSum<T>;
  const int64_t c = blockIdx.x, p = blockIdx.y, P = gridDim.y, Mv = M / V;
  const int64_t j0 = p * piece, j1 = j0 + piece < Mv ? j0 + piece : Mv;
  const double mu = double(k.mean[c]);
  const auto kc = RELU ? k(c) : norm_math::Affine<acc_t<T>>{};
  double sdy = 0, sdx = 0;
  for_each_vector<V, PACKED ? kPackRound : 1, true>(gy, x, j0, j1, S, C, c,
                                                    [&](const Pack<T, V>& gv, const Pack<T, V>& xv) {
                                                      if constexpr (PACKED) {
                                                        Sum a = 0, b = 0;
#pragma unroll
                                                        for (int e = 0; e < V; ++e) {
                                                          const auto xa = to_acc(xv.v[e]);
                                                          const Sum g = Sum(gated<RELU>(to_acc(gv.v[e]), xa, kc));
                                                          a += g;
                                                          b = fma_rn(g, Sum(xa) - Sum(mu), b);
                                                        }
                                                        sdy += double(a);
                                                        sdx += double(b);
                                                      } else {
#pragma unroll
                                                        for (int e = 0; e < V; ++e) {
                                                          const auto xa = to_acc(xv.v[e]);
                                                          const double g = double(gated<RELU>(to_acc(gv.v[e]), xa, kc));
                                                          sdy += g;
                                                          sdx = __fma_rn(g, double(xa) - mu, sdx);
                                                        }
                                                      }
                                                    });
  write_block_partials(sdy, sdx, part, p, P, C, c);
  if (last_to_finish(done, c, unsigned(P)) && threadIdx.x == 0) finish_channel_grad(part, P, C, c, M, k, o);
}

// The same for rows of channels (S == 1: x (M, C), C % V == 0), split by row_vector_split: thread t
// of block (g, p) takes channel vector vector_of(g, t), V consecutive channels in one 16-byte load,
// of rows row_of(t), row_of(t) + rows, ... of piece p, kPackRound rows loaded before any is summed,
// each channel's kPackRound values summed in PackSum first. The block adds its threads' sums of each
// channel in order of row offset, and the last of the P blocks of its column of vectors finishes
// the column's channels.

// sum.template operator()<n>(av, bv) on rounds of n = kPackRound rows (then single rows) of vector v
// of a, and of b when TWO: rows j0, j0 + rows, ... < j1 of an (M, G) array of vectors.
template <int V, bool TWO, class T, class F>
__device__ __forceinline__ void for_each_row_round(const T* a, const T* b, int64_t j0, int64_t j1, int64_t rows,
                                                   int64_t G, int64_t v, F&& sum) {
  using Vec = Pack<T, V>;
  const Vec *va = reinterpret_cast<const Vec*>(a), *vb = reinterpret_cast<const Vec*>(b);
  int64_t j = j0;
  for (; j + (kPackRound - 1) * rows < j1; j += kPackRound * rows) {
    Vec av[kPackRound], bv[kPackRound]{};
#pragma unroll
    for (int u = 0; u < kPackRound; ++u) {
      av[u] = va[(j + u * rows) * G + v];
      if constexpr (TWO) bv[u] = vb[(j + u * rows) * G + v];
    }
    sum.template operator()<kPackRound>(av, bv);
  }
  for (; j < j1; j += rows) {
    Vec av[1] = {va[j * G + v]}, bv[1]{};
    if constexpr (TWO) bv[0] = vb[j * G + v];
    sum.template operator()<1>(av, bv);
  }
}

// This thread's part of block (g, p) of a rows pass over M rows of G vectors: vector v of rows j0,
// j0 + sp.rows, ... < j1 (none where it is not active); the block's channels are c0, c0 + 1, ... < c1.
struct RowVectorThread {
  int64_t g, p, P, v, j0, j1, c0, c1;
  bool active;
  __device__ RowVectorThread(const RowVectorSplit& sp, int64_t M, int64_t C, int V)
      : g(blockIdx.x), p(blockIdx.y), P(gridDim.y), v(sp.vector_of(g, threadIdx.x)),
        j0(p * sp.sp.piece + sp.row_of(threadIdx.x)), j1((p + 1) * sp.sp.piece < M ? (p + 1) * sp.sp.piece : M),
        c0(g * sp.group * V), c1(c0 + sp.group * V < C ? c0 + sp.group * V : C),
        active(sp.row_of(threadIdx.x) < sp.rows && v < C / V) {}
};

// Adds the block's per-thread sums (a, b) of each of its channels in order of row offset and writes
// channel c's totals to part (2, P, C) at piece p (threads without a vector hold zeros).
template <int V>
__device__ void write_vector_row_partials(const double (&a)[V], const double (&b)[V], const RowVectorSplit& sp,
                                          const RowVectorThread& th, int64_t C, double* part) {
  __shared__ double sum1[kRowBlock][V], sum2[kRowBlock][V];
#pragma unroll
  for (int e = 0; e < V; ++e) sum1[threadIdx.x][e] = a[e], sum2[threadIdx.x][e] = b[e];
  __syncthreads();
  for (int64_t c = th.c0 + threadIdx.x; c < th.c1; c += kRowBlock) {
    const int64_t vl = (c - th.c0) / V, e = (c - th.c0) % V;
    double s = 0, q = 0;
    for (int64_t r = 0; r < sp.rows; ++r) s += sum1[r * sp.group + vl][e], q += sum2[r * sp.group + vl][e];
    part[th.p * C + c] = s;
    part[(th.P + th.p) * C + c] = q;
  }
}

// Forward, block (g, p): each channel's sums of d = x - shift and d * d, shift its first value.
template <class T, int V>
__global__ void bn_packed_rows_stats_kernel(const T* x, int64_t C, int64_t M, RowVectorSplit sp, double* part,
                                            unsigned* done, StatsOut<acc_t<T>> o) {
  using Sum = PackSum<T>;
  using Vec = Pack<T, V>;
  const RowVectorThread th(sp, M, C, V);
  const int64_t v = th.v;
  double s1[V] = {}, s2[V] = {};
  if (th.active) {
    const Vec first = reinterpret_cast<const Vec*>(x)[v];
    Sum shift[V];
#pragma unroll
    for (int e = 0; e < V; ++e) shift[e] = Sum(to_acc(first.v[e]));
    for_each_row_round<V, false>(x, x, th.j0, th.j1, sp.rows, C / V, v, [&]<int N>(const Vec* xv, const Vec*) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        Sum a = 0, b = 0;
#pragma unroll
        for (int u = 0; u < N; ++u) {
          const Sum d = Sum(to_acc(xv[u].v[e])) - shift[e];
          a += d;
          b = fma_rn(d, d, b);
        }
        s1[e] += double(a);
        s2[e] += double(b);
      }
    });
  }
  write_vector_row_partials<V>(s1, s2, sp, th, C, part);
  if (last_to_finish(done, th.g, unsigned(th.P)))
    for (int64_t c = th.c0 + threadIdx.x; c < th.c1; c += kRowBlock)
      finish_channel_stats(part, th.P, C, c, double(to_acc(x[c])), M, o);
}

// Backward, block (g, p): each channel's sdy = sum gy and sdx = sum gy * (x - mean), gy gated by the
// forward's ReLU when RELU.
template <class T, bool RELU, int V>
__global__ void bn_packed_rows_grad_kernel(const T* gy, const T* x, int64_t C, int64_t M, RowVectorSplit sp,
                                           ChannelAffine<acc_t<T>> k, double* part, unsigned* done,
                                           GradOut<acc_t<T>> o) {
  using Sum = PackSum<T>;
  using Vec = Pack<T, V>;
  const RowVectorThread th(sp, M, C, V);
  const int64_t v = th.v;
  double sdy[V] = {}, sdx[V] = {};
  if (th.active) {
    Sum mu[V];
    norm_math::Affine<acc_t<T>> kc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      mu[e] = Sum(k.mean[v * V + e]);
      kc[e] = RELU ? k(v * V + e) : norm_math::Affine<acc_t<T>>{};
    }
    for_each_row_round<V, true>(gy, x, th.j0, th.j1, sp.rows, C / V, v, [&]<int N>(const Vec* gv, const Vec* xv) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        Sum a = 0, b = 0;
#pragma unroll
        for (int u = 0; u < N; ++u) {
          const auto xa = to_acc(xv[u].v[e]);
          const Sum gg = Sum(gated<RELU>(to_acc(gv[u].v[e]), xa, kc[e]));
          a += gg;
          b = fma_rn(gg, Sum(xa) - mu[e], b);
        }
        sdy[e] += double(a);
        sdx[e] += double(b);
      }
    });
  }
  write_vector_row_partials<V>(sdy, sdx, sp, th, C, part);
  if (last_to_finish(done, th.g, unsigned(th.P)))
    for (int64_t c = th.c0 + threadIdx.x; c < th.c1; c += kRowBlock) finish_channel_grad(part, th.P, C, c, M, k, o);
}

// gx = g * p[c] + x * q[c] + r[c], g being gy gated by the forward's ReLU when RELU.
template <class T, bool RELU, class I>
__global__ void bn_grad_x_kernel(T* gx, const T* gy, const T* x, int64_t n, int64_t C, int64_t S, const acc_t<T>* coef,
                                 ChannelAffine<acc_t<T>> k) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = channel_of<I>(i, C, S);
    const auto xa = to_acc(x[i]);
    const auto g = gated<RELU>(to_acc(gy[i]), xa, RELU ? k(c) : norm_math::Affine<acc_t<T>>{});
    gx[i] = convert<T>(grad_x_value(g, xa, coef[c], coef[C + c], coef[2 * C + c]));
  }
}

// The same on V elements per thread; nv = n / V.
template <class T, bool RELU, int V, ChannelRun R, class I>
__global__ void bn_grad_x_vec_kernel(T* gx, const T* gy, const T* x, int64_t nv, int64_t C, int64_t S,
                                     const acc_t<T>* coef, ChannelAffine<acc_t<T>> k) {
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += int64_t(gridDim.x) * blockDim.x) {
    const Pack<T, V> gv = reinterpret_cast<const Pack<T, V>*>(gy)[v], xv = reinterpret_cast<const Pack<T, V>*>(x)[v];
    Pack<T, V> out;
    const int64_t c0 = R == ChannelRun::one_channel ? channel_of<I>(v * V, C, S) : int64_t(I(v * V) % I(C));
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int64_t c = R == ChannelRun::one_channel ? c0 : c0 + j;
      const auto xa = to_acc(xv.v[j]);
      const auto g = gated<RELU>(to_acc(gv.v[j]), xa, RELU ? k(c) : norm_math::Affine<acc_t<T>>{});
      out.v[j] = convert<T>(grad_x_value(g, xa, coef[c], coef[C + c], coef[2 * C + c]));
    }
    reinterpret_cast<Pack<T, V>*>(gx)[v] = out;
  }
}

// Runs f.template operator()<I>() with I = uint32_t when every flat index of n elements fits, else int64_t.
template <class F>
void with_index_type(int64_t n, F&& f) {
  if (n <= int64_t(UINT32_MAX)) f.template operator()<uint32_t>();
  else f.template operator()<int64_t>();
}

// ---- group norm: x (N, C, S), rows (n, g) of L = K * S contiguous values, K = C / groups --------

// The threads that share one row, and how they add up their values: the whole block (rows of any
// length), or one warp (short rows, no shared memory or barriers). kS = 1 where S == 1 is known,
// so the channel of position j is c0 + j without a division.
struct BlockRow {
  static constexpr int kStride = kRowBlock;
  __device__ __forceinline__ static int first() { return threadIdx.x; }
  __device__ __forceinline__ static double sum(double v) { return block_sum(v); }
};
struct WarpRow {
  static constexpr int kStride = 32;
  __device__ __forceinline__ static int first() { return threadIdx.x % 32; }
  __device__ __forceinline__ static double sum(double v) {
#pragma unroll
    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
  }
};
template <int kS>
__device__ __forceinline__ int64_t channel_at(int64_t c0, int64_t j, int64_t S) {
  return kS == 1 ? c0 + j : c0 + j / S;
}

// Row r of L = K * S values: its mean and rstd, and y = x * a + sh with a = rstd * w[c] and
// sh = b[c] - mean * a.
template <class R, int kS, class T>
__device__ void gn_forward_row(int64_t r, T* y, const T* x, int64_t groups, int64_t K, int64_t S, double eps,
                               const acc_t<T>* w, const acc_t<T>* b, acc_t<T>* mean, acc_t<T>* rstd) {
  using A = acc_t<T>;
  const int64_t L = K * S;
  const T* xr = x + r * L;
  T* yr = y + r * L;
  const int64_t c0 = (r % groups) * K;
  double s = 0;
  for (int64_t j = R::first(); j < L; j += R::kStride) s += double(to_acc(xr[j]));
  const double mu = R::sum(s) / double(L);
  double q = 0;
  for (int64_t j = R::first(); j < L; j += R::kStride) {
    const double d = double(to_acc(xr[j])) - mu;
    q += d * d;
  }
  const double v = R::sum(q) / double(L);
  const A m = A(mu), rs = A(1.0 / sqrt(v + eps));
  if (R::first() == 0) mean[r] = m, rstd[r] = rs;
  for (int64_t j = R::first(); j < L; j += R::kStride) {  // (x - mean) * a + b, as the CPU's
    const int64_t c = channel_at<kS>(c0, j, S);
    yr[j] = convert<T>((to_acc(xr[j]) - m) * (rs * param_or(w, c, A(1))) + param_or(b, c, A(0)));
  }
}

// Row r's input gradient: with h = gy * w, gx = rstd * (h - mean(h) - xhat * mean(h * xhat)).
template <class R, int kS, class T>
__device__ void gn_grad_x_row(int64_t r, T* gx, const T* gy, const T* x, int64_t groups, int64_t K, int64_t S,
                              const acc_t<T>* w, const acc_t<T>* mean, const acc_t<T>* rstd) {
  using A = acc_t<T>;
  const int64_t L = K * S;
  const T* xr = x + r * L;
  const T* gr = gy + r * L;
  const int64_t c0 = (r % groups) * K;
  const double mu = double(mean[r]), rs = double(rstd[r]);
  double s0 = 0, s1 = 0;
  for (int64_t j = R::first(); j < L; j += R::kStride) {
    const double h = double(to_acc(gr[j])) * double(param_or(w, channel_at<kS>(c0, j, S), A(1)));
    s0 += h;
    s1 += h * (double(to_acc(xr[j])) - mu);
  }
  s0 = R::sum(s0);
  s1 = R::sum(s1);
  const double mh = s0 / double(L), k = rs * rs * s1 / double(L);
  const A q = A(-rs * k), sh = A(rs * (k * mu - mh));
  for (int64_t j = R::first(); j < L; j += R::kStride) {
    const A a = A(rs * double(param_or(w, channel_at<kS>(c0, j, S), A(1))));
    gx[r * L + j] = convert<T>(to_acc(gr[j]) * a + to_acc(xr[j]) * q + sh);
  }
}

// A block per row, rows blockIdx.x, blockIdx.x + gridDim.x, ...
template <class T>
__global__ void gn_forward_kernel(T* y, const T* x, int64_t rows, int64_t groups, int64_t K, int64_t S, double eps,
                                  const acc_t<T>* w, const acc_t<T>* b, acc_t<T>* mean, acc_t<T>* rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    gn_forward_row<BlockRow, 0>(r, y, x, groups, K, S, eps, w, b, mean, rstd);
}
template <class T>
__global__ void gn_grad_x_kernel(T* gx, const T* gy, const T* x, int64_t rows, int64_t groups, int64_t K, int64_t S,
                                 const acc_t<T>* w, const acc_t<T>* mean, const acc_t<T>* rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    gn_grad_x_row<BlockRow, 0>(r, gx, gy, x, groups, K, S, w, mean, rstd);
}

// Block c: grad_w[c] = sum gy * xhat, grad_b[c] = sum gy over (n, s).
template <class T>
__global__ void gn_param_grad_kernel(const T* gy, const T* x, int64_t N, int64_t C, int64_t S, int64_t groups,
                                     const acc_t<T>* mean, const acc_t<T>* rstd, acc_t<T>* grad_w, acc_t<T>* grad_b) {
  using A = acc_t<T>;
  const int64_t K = C / groups, M = N * S;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t j = threadIdx.x; j < M; j += kRowBlock) {
      const int64_t n = j / S, i = (n * C + c) * S + j % S, r = n * groups + c / K;
      const double g = double(to_acc(gy[i]));
      sw += g * (double(to_acc(x[i])) - double(mean[r])) * double(rstd[r]);
      sb += g;
    }
    sw = block_sum(sw);
    sb = block_sum(sb);
    if (threadIdx.x == 0) {
      if (grad_w) grad_w[c] = A(sw);
      if (grad_b) grad_b[c] = A(sb);
    }
  }
}

// ---- group norm with S == 1 (layer norm): rows of K contiguous features -----------------------
// A row of a few hundred values (a transformer's layer norm) leaves a 256-thread block mostly idle
// and waiting on its shared-memory reductions. Here one warp takes a row: its lanes read the row's
// consecutive values (each read coalesced across the warp), and the sums reduce by shuffles in a
// fixed order. The parameter gradients, sums down each feature over every row, walk the rows as
// batch norm's rows pass does (32 features per block, row partials added in order).

// A row is short enough for one warp: no longer than this (128 values per lane).
constexpr int64_t kWarpRowMax = 4096;
constexpr int kWarpsPerBlock = kRowBlock / 32;

// A warp per row (S == 1): warp w of the grid takes rows w, w + warps, ...
template <class T>
__global__ void gn_forward_warp_kernel(T* y, const T* x, int64_t rows, int64_t groups, int64_t K, double eps,
                                       const acc_t<T>* w, const acc_t<T>* b, acc_t<T>* mean, acc_t<T>* rstd) {
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps)
    gn_forward_row<WarpRow, 1>(r, y, x, groups, K, 1, eps, w, b, mean, rstd);
}
template <class T>
__global__ void gn_grad_x_warp_kernel(T* gx, const T* gy, const T* x, int64_t rows, int64_t groups, int64_t K,
                                      const acc_t<T>* w, const acc_t<T>* mean, const acc_t<T>* rstd) {
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows; r += warps)
    gn_grad_x_row<WarpRow, 1>(r, gx, gy, x, groups, K, 1, w, mean, rstd);
}

// Block (blockIdx.x, p): features c = 32 * blockIdx.x + tx over rows ty, ty + kRowThreads, ... of
// piece p of the N rows: sw = sum gy * xhat, sb = sum gy; the last of the P blocks of the 32
// features adds the P partials in order and writes grad_w, grad_b.
template <class T>
__global__ void gn_rows_param_grad_kernel(const T* gy, const T* x, int64_t N, int64_t C, int64_t groups, int64_t piece,
                                          const acc_t<T>* mean, const acc_t<T>* rstd, double* part, unsigned* done,
                                          acc_t<T>* grad_w, acc_t<T>* grad_b) {
  using A = acc_t<T>;
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x, j0 = blockIdx.y * piece;
  const int64_t j1 = j0 + piece < N ? j0 + piece : N;
  const int64_t g = c < C ? c / (C / groups) : 0;
  double sw = 0, sb = 0;
  if (c < C)
    for (int64_t j = j0 + threadIdx.y; j < j1; j += kRowThreads) {
      const int64_t r = j * groups + g;
      const double gv = double(to_acc(gy[j * C + c]));
      sw += gv * (double(to_acc(x[j * C + c])) - double(mean[r])) * double(rstd[r]);
      sb += gv;
    }
  write_row_partials(sw, sb, c, C, part);
  if (last_to_finish(done, blockIdx.x, gridDim.y) && threadIdx.y == 0 && c < C) {
    double tw, tb;
    channel_totals(part, gridDim.y, C, c, tw, tb);
    if (grad_w) grad_w[c] = A(tw);
    if (grad_b) grad_b[c] = A(tb);
  }
}

template <class A>
const A* cptr_or_null(const Tensor& t) {
  return t.defined() ? ptr<const A>(t) : nullptr;
}
template <class A>
A* ptr_or_null(const Tensor& t) {
  return t.defined() ? ptr<A>(t) : nullptr;
}

// batch_norm_backward for one dtype, with gy gated by the forward's ReLU when RELU.
template <class T, bool RELU>
void batch_norm_backward_as(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                            const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                            const Tensor& bias, bool training) {
  using A = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), n = x.numel(), M = N * S;
  const ChannelAffine<A> k{ptr<const A>(mean), ptr<const A>(invstd), cptr_or_null<A>(weight), cptr_or_null<A>(bias)};
  Tensor coef;
  if (grad_x.defined()) coef = make_tensor({3, C}, mean.dtype(), x.device());  // (3, C): p, q, r
  const GradOut<A> o{ptr_or_null<A>(grad_w), ptr_or_null<A>(grad_b), ptr_or_null<A>(coef), training};
  constexpr int V = int(16 / sizeof(T));
  const bool vec = stat_vectors<T>(S, {grad_out.raw_data(), x.raw_data()});
  const StatGrid sg = stat_grid(M, C, S, vec ? V : 1,
                                packed_rows<T>(S, C, {grad_out.raw_data(), x.raw_data()}) ? V : 0);
  if (M == 0) {
    bn_empty_grad_kernel<A><<<blocks_for(C), kThreads, 0, stream()>>>(C, k, o);
    CUDA_CHECK_LAUNCH("batch_norm_backward");
  } else {
    Tensor part = make_tensor({2, sg.sp.P, C}, kF64, x.device());
    Tensor keep;
    unsigned* done = zeroed_counters("batch_norm_backward", sg.slots, x.device(), keep);
    const T *gp = ptr<const T>(grad_out), *xp = ptr<const T>(x);
    if (sg.row_vectors)
      bn_packed_rows_grad_kernel<T, RELU, V>
          <<<sg.grid, sg.block, 0, stream()>>>(gp, xp, C, M, sg.rs, k, ptr<double>(part), done, o);
    else if (sg.rows)
      bn_rows_partial_grad_kernel<T, RELU>
          <<<sg.grid, sg.block, 0, stream()>>>(gp, xp, C, M, sg.sp.piece, k, ptr<double>(part), done, o);
    else if (vec && toggles::batch_norm_packed_stats())
      bn_partial_grad_kernel<T, RELU, V, true>
          <<<sg.grid, sg.block, 0, stream()>>>(gp, xp, C, S, M, sg.sp.piece, k, ptr<double>(part), done, o);
    else if (vec)
      bn_partial_grad_kernel<T, RELU, V, false>
          <<<sg.grid, sg.block, 0, stream()>>>(gp, xp, C, S, M, sg.sp.piece, k, ptr<double>(part), done, o);
    else
      bn_partial_grad_kernel<T, RELU, 1, false>
          <<<sg.grid, sg.block, 0, stream()>>>(gp, xp, C, S, M, sg.sp.piece, k, ptr<double>(part), done, o);
    CUDA_CHECK_LAUNCH("batch_norm_backward");
  }
  if (!grad_x.defined() || n == 0) return;
  ChannelRun run;
  if (vector_channels(C, S, V, {grad_x.raw_data(), grad_out.raw_data(), x.raw_data()}, run)) {
    with_index_type(n, [&]<class I>() {
      const auto launch = [&]<ChannelRun R>() {
        bn_grad_x_vec_kernel<T, RELU, V, R, I><<<blocks_for(n / V), kThreads, 0, stream()>>>(
            ptr<T>(grad_x), ptr<const T>(grad_out), ptr<const T>(x), n / V, C, S, ptr<const A>(coef), k);
      };
      run == ChannelRun::one_channel ? launch.template operator()<ChannelRun::one_channel>()
                                     : launch.template operator()<ChannelRun::consecutive_channels>();
      CUDA_CHECK_LAUNCH("batch_norm_backward");
    });
    return;
  }
  with_index_type(n, [&]<class I>() {
    bn_grad_x_kernel<T, RELU, I><<<blocks_for(n), kThreads, 0, stream()>>>(
        ptr<T>(grad_x), ptr<const T>(grad_out), ptr<const T>(x), n, C, S, ptr<const A>(coef), k);
    CUDA_CHECK_LAUNCH("batch_norm_backward");
  });
}

// The training statistics of x (N, C, S) and their running blend, in one launch (M > 0).
template <class T>
void batch_norm_stats(const Tensor& x, const StatsOut<acc_t<T>>& o) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), M = N * S;
  constexpr int V = int(16 / sizeof(T));
  const bool vec = stat_vectors<T>(S, {x.raw_data()});
  const StatGrid sg = stat_grid(M, C, S, vec ? V : 1, packed_rows<T>(S, C, {x.raw_data()}) ? V : 0);
  Tensor part = make_tensor({2, sg.sp.P, C}, kF64, x.device());
  Tensor keep;
  unsigned* done = zeroed_counters("batch_norm", sg.slots, x.device(), keep);
  const T* xp = ptr<const T>(x);
  if (sg.row_vectors)
    bn_packed_rows_stats_kernel<T, V><<<sg.grid, sg.block, 0, stream()>>>(xp, C, M, sg.rs, ptr<double>(part), done, o);
  else if (sg.rows)
    bn_rows_partial_stats_kernel<T>
        <<<sg.grid, sg.block, 0, stream()>>>(xp, C, M, sg.sp.piece, ptr<double>(part), done, o);
  else if (vec && toggles::batch_norm_packed_stats())
    bn_partial_stats_kernel<T, V, true>
        <<<sg.grid, sg.block, 0, stream()>>>(xp, C, S, M, sg.sp.piece, ptr<double>(part), done, o);
  else if (vec)
    bn_partial_stats_kernel<T, V, false>
        <<<sg.grid, sg.block, 0, stream()>>>(xp, C, S, M, sg.sp.piece, ptr<double>(part), done, o);
  else
    bn_partial_stats_kernel<T, 1, false>
        <<<sg.grid, sg.block, 0, stream()>>>(xp, C, S, M, sg.sp.piece, ptr<double>(part), done, o);
  CUDA_CHECK_LAUNCH("batch_norm");
}

}  // namespace

void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& var, const Tensor& invstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& residual, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps, bool relu) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), n = x.numel(), M = N * S;
  MDL_CHECK(!residual.defined() || relu, "batch_norm: a residual is added only before a ReLU");
  dispatch_floating<DeviceTypes>(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    // M == 0 leaves the statistics unset, as no element reads them (a training caller has M > 1).
    if (training && C > 0 && M > 0) {
      const double m = double(M);
      batch_norm_stats<T>(x, {ptr<A>(mean), ptr<A>(var), ptr<A>(invstd), ptr_or_null<A>(running_mean),
                              ptr_or_null<A>(running_var), A(1.0 - momentum), A(momentum), A(momentum * m / (m - 1.0)),
                              eps});
    }
    if (n == 0) return;
    const ChannelAffine<A> k{ptr<const A>(mean), ptr<const A>(invstd), cptr_or_null<A>(weight), cptr_or_null<A>(bias)};
    constexpr int V = int(16 / sizeof(T));
    const T* r = residual.defined() ? ptr<const T>(residual) : nullptr;
    ChannelRun run;
    const bool vec = vector_channels(C, S, V, {out.raw_data(), x.raw_data(), r}, run);
    // Three passes: plain, with the ReLU, with the residual and the ReLU.
    const auto apply = [&]<bool RELU, bool RES>() {
      with_index_type(n, [&]<class I>() {
        const auto launch = [&]<ChannelRun R>() {
          bn_apply_vec_kernel<T, RELU, RES, V, R, I>
              <<<blocks_for(n / V), kThreads, 0, stream()>>>(ptr<T>(out), ptr<const T>(x), r, n / V, C, S, k);
        };
        if (!vec)
          bn_apply_kernel<T, RELU, RES, I>
              <<<blocks_for(n), kThreads, 0, stream()>>>(ptr<T>(out), ptr<const T>(x), r, n, C, S, k);
        else if (run == ChannelRun::one_channel) launch.template operator()<ChannelRun::one_channel>();
        else launch.template operator()<ChannelRun::consecutive_channels>();
        CUDA_CHECK_LAUNCH("batch_norm");
      });
    };
    if (r) apply.template operator()<true, true>();
    else with_relu(relu, [&]<bool RELU>() { apply.template operator()<RELU, false>(); });
  });
}

void batch_norm_backward(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                         const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                         const Tensor& bias, bool training, bool relu) {
  const int64_t C = x.size(1);
  if (C == 0) return;
  dispatch_floating<DeviceTypes>(x.dtype(), "batch_norm_backward", [&]<class T>() {
    with_relu(relu, [&]<bool RELU>() {
      batch_norm_backward_as<T, RELU>(grad_x, grad_w, grad_b, grad_out, x, mean, invstd, weight, bias, training);
    });
  });
}


void group_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t groups, double eps) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), rows = N * groups;
  if (rows == 0) return;
  dispatch_floating<DeviceTypes>(x.dtype(), "group_norm", [&]<class T>() {
    using A = acc_t<T>;
    if (S == 1 && C / groups <= kWarpRowMax)
      gn_forward_warp_kernel<T><<<grid_for((rows + kWarpsPerBlock - 1) / kWarpsPerBlock), kRowBlock, 0, stream()>>>(
          ptr<T>(out), ptr<const T>(x), rows, groups, C / groups, eps, cptr_or_null<A>(weight), cptr_or_null<A>(bias),
          ptr<A>(mean), ptr<A>(rstd));
    else
      gn_forward_kernel<T><<<grid_for(rows), kRowBlock, 0, stream()>>>(
          ptr<T>(out), ptr<const T>(x), rows, groups, C / groups, S, eps, cptr_or_null<A>(weight),
          cptr_or_null<A>(bias), ptr<A>(mean), ptr<A>(rstd));
    CUDA_CHECK_LAUNCH("group_norm");
  });
}

void group_norm_backward(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), rows = N * groups;
  dispatch_floating<DeviceTypes>(x.dtype(), "group_norm_backward", [&]<class T>() {
    using A = acc_t<T>;
    if ((grad_w.defined() || grad_b.defined()) && C > 0) {
      if (S == 1 && N > 0) {  // rows of C features: the sums walk down the features, 32 per block
        const StatGrid sg = stat_grid(N, C, 1, 1);
        Tensor part = make_tensor({2, sg.sp.P, C}, kF64, x.device());
        Tensor keep;
        unsigned* done = zeroed_counters("group_norm_backward", sg.slots, x.device(), keep);
        gn_rows_param_grad_kernel<T><<<sg.grid, sg.block, 0, stream()>>>(
            ptr<const T>(grad_out), ptr<const T>(x), N, C, groups, sg.sp.piece, ptr<const A>(mean), ptr<const A>(rstd),
            ptr<double>(part), done, ptr_or_null<A>(grad_w), ptr_or_null<A>(grad_b));
      } else {
        gn_param_grad_kernel<T><<<grid_for(C), kRowBlock, 0, stream()>>>(
            ptr<const T>(grad_out), ptr<const T>(x), N, C, S, groups, ptr<const A>(mean), ptr<const A>(rstd),
            ptr_or_null<A>(grad_w), ptr_or_null<A>(grad_b));
      }
      CUDA_CHECK_LAUNCH("group_norm_backward");
    }
    if (!grad_x.defined() || rows == 0) return;
    if (S == 1 && C / groups <= kWarpRowMax)
      gn_grad_x_warp_kernel<T><<<grid_for((rows + kWarpsPerBlock - 1) / kWarpsPerBlock), kRowBlock, 0, stream()>>>(
          ptr<T>(grad_x), ptr<const T>(grad_out), ptr<const T>(x), rows, groups, C / groups, cptr_or_null<A>(weight),
          ptr<const A>(mean), ptr<const A>(rstd));
    else
      gn_grad_x_kernel<T><<<grid_for(rows), kRowBlock, 0, stream()>>>(
          ptr<T>(grad_x), ptr<const T>(grad_out), ptr<const T>(x), rows, groups, C / groups, S, cptr_or_null<A>(weight),
          ptr<const A>(mean), ptr<const A>(rstd));
    CUDA_CHECK_LAUNCH("group_norm_backward");
  });
}

}  // namespace mdl::cuda
