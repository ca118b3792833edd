// Reductions on the GPU: sum/mean/prod/max/min over any set of dims, var, and max/min with indices
// along one dim. The input is seen as M outputs x R reduced elements through two strided
// geometries (kept dims, reduced dims). Long reductions take one block per output (threads stride
// over R, then a fixed-order tree in shared memory); short ones one thread per output. Either way
// the order of additions depends only on the shape, so results are deterministic. Floating sums
// accumulate in double; integer sums and products wrap in uint64 (as on the CPU).
#include <cmath>
#include <limits>

#include "cuda/common.cuh"
#include "cuda/kernels.cuh"
#include "kernels/reduce_rules.h"

namespace mdl::cuda {

using namespace detail;

namespace {

constexpr int kBlock = 256;

struct Split {
  int nk = 0, nr = 0;
  int64_t ksize[kMaxDimsCuda], kin[kMaxDimsCuda], kout[kMaxDimsCuda];
  int64_t rsize[kMaxDimsCuda], rin[kMaxDimsCuda];
  int64_t M = 1, R = 1;

  __device__ __forceinline__ void kept(int64_t m, int64_t& in_off, int64_t& out_off) const {
    in_off = out_off = 0;
    for (int d = nk - 1; d >= 0; --d) {
      const int64_t q = m / ksize[d], r = m - q * ksize[d];
      m = q;
      in_off += r * kin[d];
      out_off += r * kout[d];
    }
  }
  __device__ __forceinline__ int64_t red(int64_t r) const {
    int64_t off = 0;
    for (int d = nr - 1; d >= 0; --d) {
      const int64_t q = r / rsize[d], x = r - q * rsize[d];
      r = q;
      off += x * rin[d];
    }
    return off;
  }
};

Split make_split(const char* op, const Tensor& out, const Tensor& in, const std::vector<bool>& mask) {
  Split s;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (in.size(d) == 1) continue;
    MDL_CHECK((mask[size_t(d)] ? s.nr : s.nk) < kMaxDimsCuda, op, ": CUDA reductions take at most ", kMaxDimsCuda,
              " kept and ", kMaxDimsCuda, " reduced dims, got shape ", shape_str(in.shape()));
    if (mask[size_t(d)]) {
      s.rsize[s.nr] = in.size(d), s.rin[s.nr] = in.stride(d), ++s.nr;
      s.R *= in.size(d);
    } else {
      s.ksize[s.nk] = in.size(d), s.kin[s.nk] = in.stride(d), s.kout[s.nk] = out.stride(d), ++s.nk;
      s.M *= in.size(d);
    }
  }
  return s;
}

enum class Kind { Sum, Mean, Prod, Max, Min, Var };

template <class T, Kind K>
struct Reducer {
  using X = acc_t<T>;
  static constexpr bool kFloat = is_float_v<T>;
  using Acc = std::conditional_t<K == Kind::Max || K == Kind::Min, X, std::conditional_t<kFloat, double, uint64_t>>;
  __device__ static Acc identity() {
    if constexpr (K == Kind::Prod) return Acc(1);
    else if constexpr (K == Kind::Max && kFloat) return Acc(-INFINITY);
    else if constexpr (K == Kind::Max) return std::numeric_limits<Acc>::lowest();
    else if constexpr (K == Kind::Min && kFloat) return Acc(INFINITY);
    else if constexpr (K == Kind::Min) return std::numeric_limits<Acc>::max();
    else return Acc(0);
  }
  __device__ static Acc combine(Acc a, Acc b) {
    if constexpr (K == Kind::Prod) return a * b;
    else if constexpr (K == Kind::Max) return (b > a || b != b) && a == a ? b : a;
    else if constexpr (K == Kind::Min) return (b < a || b != b) && a == a ? b : a;
    else return a + b;
  }
  // x's contribution; Var subtracts the center (the mean) and squares.
  __device__ static Acc lift(T v, double center) {
    if constexpr (K == Kind::Var) {
      const double d = double(to_acc(v)) - center;
      return Acc(d * d);
    } else if constexpr (K == Kind::Max || K == Kind::Min) {
      return Acc(to_acc(v));
    } else if constexpr (std::is_same_v<T, bool>) {
      return Acc(v ? 1 : 0);
    } else {
      return Acc(to_acc(v));
    }
  }
};

// The block's threads hold one value each; returns the fixed-order tree sum (valid in thread 0 and
// broadcast to all).
template <class Acc, class Combine>
__device__ Acc block_reduce(Acc v, Combine combine) {
  __shared__ Acc buf[kBlock];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int w = kBlock / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) buf[threadIdx.x] = combine(buf[threadIdx.x], buf[threadIdx.x + w]);
    __syncthreads();
  }
  const Acc r = buf[0];
  __syncthreads();
  return r;
}

template <class T, class O, Kind K>
__global__ void reduce_block_kernel(Split s, const T* in, O* out, double div) {
  using R = Reducer<T, K>;
  using Acc = typename R::Acc;
  auto comb = [](Acc a, Acc b) { return R::combine(a, b); };
  for (int64_t m = blockIdx.x; m < s.M; m += gridDim.x) {
    int64_t ioff, ooff;
    s.kept(m, ioff, ooff);
    double center = 0;
    if constexpr (K == Kind::Var) {  // first pass: the mean
      double a = 0;
      for (int64_t r = threadIdx.x; r < s.R; r += kBlock) a += double(to_acc(in[ioff + s.red(r)]));
      center = block_reduce<double>(a, [](double x, double y) { return x + y; }) / double(s.R);
    }
    Acc a = R::identity();
    for (int64_t r = threadIdx.x; r < s.R; r += kBlock) a = R::combine(a, R::lift(in[ioff + s.red(r)], center));
    a = block_reduce<Acc>(a, comb);
    if (threadIdx.x == 0) {
      if constexpr (R::kFloat && K != Kind::Max && K != Kind::Min) out[ooff] = convert<O>(double(a) / div);
      else out[ooff] = convert<O>(a);
    }
  }
}

template <class T, class O, Kind K>
__global__ void reduce_thread_kernel(Split s, const T* in, O* out, double div) {
  using R = Reducer<T, K>;
  using Acc = typename R::Acc;
  for (int64_t m = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; m < s.M; m += int64_t(gridDim.x) * blockDim.x) {
    int64_t ioff, ooff;
    s.kept(m, ioff, ooff);
    double center = 0;
    if constexpr (K == Kind::Var) {
      for (int64_t r = 0; r < s.R; ++r) center += double(to_acc(in[ioff + s.red(r)]));
      center /= double(s.R);
    }
    Acc a = R::identity();
    for (int64_t r = 0; r < s.R; ++r) a = R::combine(a, R::lift(in[ioff + s.red(r)], center));
    if constexpr (R::kFloat && K != Kind::Max && K != Kind::Min) out[ooff] = convert<O>(double(a) / div);
    else out[ooff] = convert<O>(a);
  }
}

template <class T, class O, Kind K>
void launch_reduce(const char* op, const Split& s, const Tensor& in, const Tensor& out, double div) {
  const bool by_block = s.R >= 256 || (s.R >= 32 && s.M < 2048);
  if (by_block)
    reduce_block_kernel<T, O, K>
        <<<unsigned(std::min<int64_t>(s.M, 1 << 20)), kBlock, 0, stream()>>>(s, ptr<const T>(in), ptr<O>(out), div);
  else reduce_thread_kernel<T, O, K><<<blocks_for(s.M), kThreads, 0, stream()>>>(s, ptr<const T>(in), ptr<O>(out), div);
  CUDA_CHECK_LAUNCH(op);
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& in, const std::vector<bool>& reduce_mask) {
  const char* name = reduce_op_name(op);
  kernels::check_reduce_geometry(name, out, in, reduce_mask.size());
  MDL_CHECK(op != ReduceOp::Mean || in.is_floating_point(), name, ": expected a floating dtype, got ", in.dtype());
  if (!kernels::reduce_writes_directly(op, in.dtype(), out.dtype())) {
    Tensor tmp = make_tensor(out.shape(), kernels::reduce_natural_dtype(op, in.dtype()), out.device());
    reduce(op, tmp, in, reduce_mask);
    copy(out, tmp);
    return;
  }
  if (out.numel() == 0) return;
  if (in.numel() == 0) {
    fill(out, kernels::reduce_empty_value(op));
    return;
  }
  const Split s = make_split(name, out, in, reduce_mask);
  dispatch<DeviceTypes>(in.dtype(), name, [&]<class T>() {
    if constexpr (is_float_v<T>) {
      if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
        if (out.dtype() == kF32) {  // an f16/bf16 sum or mean straight into f32
          if (op == ReduceOp::Sum) return launch_reduce<T, float, Kind::Sum>(name, s, in, out, 1.0);
          if (op == ReduceOp::Mean) return launch_reduce<T, float, Kind::Sum>(name, s, in, out, double(s.R));
        }
      }
      switch (op) {
        case ReduceOp::Sum: return launch_reduce<T, T, Kind::Sum>(name, s, in, out, 1.0);
        case ReduceOp::Mean: return launch_reduce<T, T, Kind::Sum>(name, s, in, out, double(s.R));
        case ReduceOp::Prod: return launch_reduce<T, T, Kind::Prod>(name, s, in, out, 1.0);
        case ReduceOp::Max: return launch_reduce<T, T, Kind::Max>(name, s, in, out, 1.0);
        case ReduceOp::Min: return launch_reduce<T, T, Kind::Min>(name, s, in, out, 1.0);
      }
    } else {
      using U = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;  // bool reduces as its 0/1 bytes
      switch (op) {
        case ReduceOp::Sum: return launch_reduce<U, int64_t, Kind::Sum>(name, s, in, out, 1.0);
        case ReduceOp::Prod: return launch_reduce<U, int64_t, Kind::Prod>(name, s, in, out, 1.0);
        case ReduceOp::Max: return launch_reduce<U, U, Kind::Max>(name, s, in, out, 1.0);
        case ReduceOp::Min: return launch_reduce<U, U, Kind::Min>(name, s, in, out, 1.0);
        case ReduceOp::Mean: return;  // rejected above
      }
    }
  });
}

void var(const Tensor& out, const Tensor& in, const std::vector<bool>& reduce_mask, int64_t correction) {
  kernels::check_reduce_geometry("var", out, in, reduce_mask.size());
  if (out.dtype() != in.dtype()) {
    Tensor tmp = make_tensor(out.shape(), in.dtype(), out.device());
    var(tmp, in, reduce_mask, correction);
    copy(out, tmp);
    return;
  }
  if (out.numel() == 0) return;
  if (in.numel() == 0) return fill(out, std::numeric_limits<double>::quiet_NaN());
  const Split s = make_split("var", out, in, reduce_mask);
  const double denom = double(std::max<int64_t>(0, s.R - correction));
  dispatch_floating<DeviceTypes>(in.dtype(), "var",
                                 [&]<class T>() { launch_reduce<T, T, Kind::Var>("var", s, in, out, denom); });
}

// ---- max/min with indices along one dim ----------------------------------------------------------

namespace {


// Is candidate (v, i) better than (b, j)? NaN wins (the first one); ties keep the lower index.
template <bool IsMax, class X>
__device__ __forceinline__ bool better(X v, int64_t i, X b, int64_t j) {
  const bool vn = v != v, bn = b != b;
  if (vn || bn) return vn && (!bn || i < j);
  if (v == b) return i < j;
  return IsMax ? v > b : v < b;
}

template <class T, bool IsMax>
__global__ void arg_reduce_kernel(Split s, const T* in, T* values, int64_t* indices, Split idx_geo) {
  using X = acc_t<T>;
  __shared__ X bv[kBlock];
  __shared__ int64_t bi[kBlock];
  for (int64_t m = blockIdx.x; m < s.M; m += gridDim.x) {
    int64_t ioff, voff, ioff2, xoff;
    s.kept(m, ioff, voff);
    idx_geo.kept(m, ioff2, xoff);
    X best = to_acc(in[ioff]);
    int64_t besti = 0;
    for (int64_t r = threadIdx.x; r < s.R; r += kBlock) {
      const X v = to_acc(in[ioff + r * s.rin[0]]);
      if (better<IsMax>(v, r, best, besti)) best = v, besti = r;
    }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = besti;
    __syncthreads();
    for (int w = kBlock / 2; w > 0; w /= 2) {
      if (int(threadIdx.x) < w &&
          better<IsMax>(bv[threadIdx.x + w], bi[threadIdx.x + w], bv[threadIdx.x], bi[threadIdx.x]))
        bv[threadIdx.x] = bv[threadIdx.x + w], bi[threadIdx.x] = bi[threadIdx.x + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      values[voff] = in[ioff + bi[0] * s.rin[0]];
      indices[xoff] = bi[0];
    }
    __syncthreads();
  }
}

}  // namespace

void arg_reduce(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim) {
  const char* name = is_max ? "max" : "min";
  MDL_CHECK(dim >= 0 && dim < in.dim(), name, ": dim ", dim, " out of range for shape ", shape_str(in.shape()));
  MDL_CHECK(values.dim() == in.dim() && indices.dim() == in.dim() && indices.dtype() == kI64, name, ": values ",
            shape_str(values.shape()), " and indices ", shape_str(indices.shape()),
            " are not the keepdim form of input ", shape_str(in.shape()));
  if (values.dtype() != in.dtype()) {
    Tensor tmp = make_tensor(values.shape(), in.dtype(), values.device());
    arg_reduce(is_max, tmp, indices, in, dim);
    copy(values, tmp);
    return;
  }
  if (values.numel() == 0) return;
  MDL_CHECK(in.size(dim) > 0, name, ": cannot reduce over dim ", dim, " of size 0 (shape ", shape_str(in.shape()), ")");
  std::vector<bool> mask(size_t(in.dim()), false);
  mask[size_t(dim)] = true;
  Split s = make_split(name, values, in, mask), si = make_split(name, indices, in, mask);
  if (s.nr == 0) s.nr = 1, s.rsize[0] = 1, s.rin[0] = 0;  // dim of size 1
  dispatch<DeviceTypes>(in.dtype(), name, [&]<class B>() {
    using T = std::conditional_t<std::is_same_v<B, bool>, uint8_t, B>;
    const unsigned grid = unsigned(std::min<int64_t>(s.M, 1 << 20));
    if (is_max)
      arg_reduce_kernel<T, true>
          <<<grid, kBlock, 0, stream()>>>(s, ptr<const T>(in), ptr<T>(values), ptr<int64_t>(indices), si);
    else
      arg_reduce_kernel<T, false>
          <<<grid, kBlock, 0, stream()>>>(s, ptr<const T>(in), ptr<T>(values), ptr<int64_t>(indices), si);
    CUDA_CHECK_LAUNCH(name);
  });
}

}  // namespace mdl::cuda
