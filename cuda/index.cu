// Indexing on the GPU: index_select, gather, scatter_add, index_add and tril/triu, and
// check_index. Indices are I64. The ops check them with check_index, which reports a bad one to
// the device error record (raised at the next sync) instead of reading them on the host; the kernels
// after it therefore still meet bad values, and skip them (a read gives 0, a write is dropped)
// rather than touch memory outside the tensor. The accumulating kernels give each thread one
// position that can never collide with another's and walk the colliding steps in order:
// deterministic sums, no atomics, every dtype. index_add over the rows of a contiguous matrix
// (an embedding's backward) first sorts the indices (stably, keeping each row's entries in their
// order), then sums each row's run of entries in one thread per column, in f32 for 16-bit data.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/common.cuh"
#include "cuda/kernels.cuh"
#include "cuda/runtime/device_errors.cuh"
#include "kernels/views.h"

namespace mdl::cuda {

using namespace detail;

namespace {

__device__ __forceinline__ bool in_range(int64_t k, int64_t size) { return k >= 0 && k < size; }

// index (n) contiguous: the first value outside [0, size) (and not the ignored one) is reported.
__global__ void check_index_kernel(int64_t n, const int64_t* index, kernels::IndexCheck c, DeviceErrorRecord* errors) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = index[i];
    if (in_range(v, c.size) || (c.has_ignore && v == c.ignore)) continue;
    report_device_error(errors, DeviceErrorCode::IndexOutOfRange, c.op, c.what, v, c.size, c.dim);
    return;
  }
}

template <class T>
__device__ __forceinline__ void add_into(T& o, T v) {
  if constexpr (std::is_same_v<T, bool>) o = o || v;
  else o = convert<T>(to_acc(o) + to_acc(v));
}

// g: (out slice, in slice); item i = (index entry j, slice element e).
template <class T>
__global__ void index_select_kernel(int64_t total, int64_t m, Geo<2> g, T* out, const T* in, const int64_t* idx,
                                    int64_t idx_stride, int64_t out_step, int64_t in_step, int64_t in_size) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i / m;
    int64_t off[2];
    g.offsets(i - j * m, off);
    const int64_t k = idx[j * idx_stride];
    out[off[0] + j * out_step] = in_range(k, in_size) ? in[off[1] + k * in_step] : T{};
  }
}

// g: (out, index, in with stride 0 along dim).
template <class T>
__global__ void gather_kernel(int64_t n, Geo<3> g, T* out, const int64_t* idx, const T* in, int64_t in_step,
                              int64_t in_size) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    g.offsets(i, off);
    const int64_t k = idx[off[1]];
    out[off[0]] = in_range(k, in_size) ? in[off[2] + k * in_step] : T{};
  }
}

// g: (out, index, src) over index's shape with dim collapsed; steps j along dim in order.
template <class T>
__global__ void scatter_add_kernel(int64_t n, Geo<3> g, T* out, const int64_t* idx, const T* src, int64_t len,
                                   int64_t out_step, int64_t idx_step, int64_t src_step, int64_t out_size) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    g.offsets(i, off);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = idx[off[1] + j * idx_step];
      if (in_range(k, out_size)) add_into(out[off[0] + k * out_step], src[off[2] + j * src_step]);
    }
  }
}

// g: (out slice, src slice); each slice element walks the index entries in order.
template <class T>
__global__ void index_add_kernel(int64_t n, Geo<2> g, T* out, const T* src, const int64_t* idx, int64_t n_index,
                                 int64_t idx_stride, int64_t out_step, int64_t src_step, int64_t out_size) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    g.offsets(i, off);
    for (int64_t j = 0; j < n_index; ++j) {
      const int64_t k = idx[j * idx_stride];
      if (in_range(k, out_size)) add_into(out[off[0] + k * out_step], src[off[1] + j * src_step]);
    }
  }
}

__global__ void iota_kernel(int64_t n, int64_t* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = i;
}

// out (V, D), src (n, D) contiguous; keys (n) the indices sorted stably, pos (n) the entry each
// came from. Block (k, column chunk): when k starts a run of equal keys, each thread sums its
// column of the run's src rows, in order, onto out's row in the accumulation type.
template <class T>
__global__ void sorted_rows_add_kernel(int64_t n, int64_t D, int64_t V, const int64_t* keys, const int64_t* pos,
                                       const T* src, T* out) {
  const int64_t k = blockIdx.x, d = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;
  const int64_t row = keys[k];
  if (d >= D || (k > 0 && keys[k - 1] == row) || !in_range(row, V)) return;
  auto acc = to_acc(out[row * D + d]);
  int64_t j = k;
  // Eight entries at a time while the run lasts (the keys are sorted: when the eighth is still
  // this row, so are the seven before it), so eight loads are in flight; the sum keeps its order.
  constexpr int kUnroll = 8;
  for (; j + kUnroll <= n && keys[j + kUnroll - 1] == row; j += kUnroll) {
    int64_t p[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) p[u] = pos[j + u];
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[p[u] * D + d];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += to_acc(v[u]);
  }
  for (; j < n && keys[j] == row; ++j) acc += to_acc(src[pos[j] * D + d]);
  out[row * D + d] = convert<T>(acc);
}

// out (rows, C) contiguous; g maps a row to in's offset; element (r, c) kept when in the triangle.
template <class T>
__global__ void tri_kernel(int64_t n, int64_t R, int64_t C, Geo<1> rows, int64_t col_stride, T* out, const T* in,
                           int64_t k, bool upper) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / C, c = i - row * C, r = row % R;
    const bool keep = upper ? c - r >= k : c - r <= k;
    int64_t off[1];
    rows.offsets(row, off);
    out[i] = keep ? in[off[0] + c * col_stride] : T{};
  }
}

}  // namespace

void index_select(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  const Shape slice = kernels::with_size(out.shape(), dim, 1);
  Tensor out_s = kernels::restride(out, slice), in_s = kernels::restride(in, slice);
  const Geo<2> g = make_geo<2>("index_select", {&out_s, &in_s});
  const int64_t m = out_s.numel(), n_index = index.numel();
  const int64_t idx_stride = index.dim() ? index.stride(0) : 0;
  dispatch<DeviceTypes>(out.dtype(), "index_select", [&]<class T>() {
    index_select_kernel<T><<<blocks_for(n_index * m), kThreads, 0, stream()>>>(
        n_index * m, m, g, ptr<T>(out), ptr<const T>(in), ptr<const int64_t>(index), idx_stride, out.stride(dim),
        in.stride(dim), in.size(dim));
    CUDA_CHECK_LAUNCH("index_select");
  });
}

void gather(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index) {
  if (out.numel() == 0) return;
  Tensor in_v = kernels::restride(in, index.shape(), dim);
  const Geo<3> g = make_geo<3>("gather", {&out, &index, &in_v});
  dispatch<DeviceTypes>(out.dtype(), "gather", [&]<class T>() {
    gather_kernel<T><<<blocks_for(out.numel()), kThreads, 0, stream()>>>(
        out.numel(), g, ptr<T>(out), ptr<const int64_t>(index), ptr<const T>(in), in.stride(dim), in.size(dim));
    CUDA_CHECK_LAUNCH("gather");
  });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  const Shape rest = kernels::with_size(index.shape(), dim, 1);
  Tensor out_v = kernels::restride(out, rest), idx_v = kernels::restride(index, rest),
         src_v = kernels::restride(src, rest);
  const Geo<3> g = make_geo<3>("scatter_add", {&out_v, &idx_v, &src_v});
  dispatch<DeviceTypes>(out.dtype(), "scatter_add", [&]<class T>() {
    scatter_add_kernel<T><<<blocks_for(out_v.numel()), kThreads, 0, stream()>>>(
        out_v.numel(), g, ptr<T>(out), ptr<const int64_t>(index), ptr<const T>(src), index.size(dim), out.stride(dim),
        index.stride(dim), src.stride(dim), out.size(dim));
    CUDA_CHECK_LAUNCH("scatter_add");
  });
}

namespace {

// index_add along dim 0 of contiguous out (V, ...) and src (n, ...) with floating data: the
// indices sorted by cub's radix sort (stable), then one pass over the sorted runs.
bool sorted_rows_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  if (dim != 0 || out.dim() < 1 || !out.is_contiguous() || !src.is_contiguous() || !index.is_contiguous() ||
      index.dim() != 1 || !is_floating(out.dtype()))
    return false;
  const int64_t n = index.numel(), V = out.size(0), D = V ? out.numel() / V : 0;
  // grid.y counts a row's chunks of kThreads columns: rows past 65535 chunks take the general path.
  if (D == 0 || n > INT32_MAX || src.numel() != n * D || (D + kThreads - 1) / kThreads > 65535) return false;
  const Device dev = out.device();
  Tensor pos_in = make_tensor({n}, kI64, dev), keys = make_tensor({n}, kI64, dev), pos = make_tensor({n}, kI64, dev);
  iota_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, ptr<int64_t>(pos_in));
  CUDA_CHECK_LAUNCH("index_add");
  size_t temp_bytes = 0;
  CUDA_CHECK("index_add",
             cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ptr<const int64_t>(index), ptr<int64_t>(keys),
                                             ptr<const int64_t>(pos_in), ptr<int64_t>(pos), int(n), 0, 64, stream()));
  Tensor temp = make_tensor({int64_t(std::max<size_t>(temp_bytes, 1))}, kU8, dev);
  CUDA_CHECK("index_add",
             cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, ptr<const int64_t>(index), ptr<int64_t>(keys),
                                             ptr<const int64_t>(pos_in), ptr<int64_t>(pos), int(n), 0, 64, stream()));
  const unsigned threads = unsigned(std::min<int64_t>(D, kThreads));
  const dim3 grid(unsigned(n), unsigned((D + threads - 1) / threads));
  dispatch_floating<DeviceTypes>(out.dtype(), "index_add", [&]<class T>() {
    sorted_rows_add_kernel<T><<<grid, threads, 0, stream()>>>(n, D, V, ptr<const int64_t>(keys),
                                                              ptr<const int64_t>(pos), ptr<const T>(src), ptr<T>(out));
    CUDA_CHECK_LAUNCH("index_add");
  });
  return true;
}

}  // namespace

void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t n_index = index.numel();
  if (src.numel() == 0 || n_index == 0) return;
  if (sorted_rows_add(out, dim, index, src)) return;
  if (out.dtype() == kF16 || out.dtype() == kBF16) {
    // Summed in f32 and rounded once, as the CPU's: rounded at every add, 2048 + 1 + 1 stays 2048 in
    // f16 and 60000 + 60000 - 60000 overflows.
    const Tensor sum = make_tensor(out.shape(), kF32, out.device()),
                 wide = make_tensor(src.shape(), kF32, src.device());
    cuda::copy(sum, out);
    cuda::copy(wide, src);
    index_add(sum, dim, index, wide);
    cuda::copy(out, sum);
    return;
  }
  const Shape slice = kernels::with_size(src.shape(), dim, 1);
  Tensor out_s = kernels::restride(out, slice), src_s = kernels::restride(src, slice);
  const Geo<2> g = make_geo<2>("index_add", {&out_s, &src_s});
  const int64_t idx_stride = index.dim() ? index.stride(0) : 0;
  dispatch<DeviceTypes>(out.dtype(), "index_add", [&]<class T>() {
    index_add_kernel<T><<<blocks_for(out_s.numel()), kThreads, 0, stream()>>>(
        out_s.numel(), g, ptr<T>(out), ptr<const T>(src), ptr<const int64_t>(index), n_index, idx_stride,
        out.stride(dim), src.stride(dim), out.size(dim));
    CUDA_CHECK_LAUNCH("index_add");
  });
}

void check_index(const Tensor& index, const kernels::IndexCheck& c) {
  MDL_CHECK(index.dtype() == kI64 && index.is_contiguous(), c.op, ": check_index needs a contiguous I64 index, got ",
            dtype_name(index.dtype()));
  const int64_t n = index.numel();
  if (n == 0) return;
  check_index_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(n, ptr<const int64_t>(index), c, device_errors());
  CUDA_CHECK_LAUNCH(c.op);
}

void tri(const Tensor& out, const Tensor& in, int64_t k, bool upper) {
  if (out.numel() == 0) return;
  const int64_t R = in.size(-2), C = in.size(-1);
  k = std::clamp(k, -R - 1, C + 1);
  // Rows of in: all dims but the last, as a one-operand geometry.
  Shape rshape(in.shape().begin(), in.shape().end() - 1), rstrides(in.strides().begin(), in.strides().end() - 1);
  Tensor rows_v = make_view(in, rshape, rstrides, in.offset());
  const Geo<1> rows = make_geo<1>(upper ? "triu" : "tril", {&rows_v});
  dispatch<DeviceTypes>(out.dtype(), upper ? "triu" : "tril", [&]<class T>() {
    tri_kernel<T><<<blocks_for(out.numel()), kThreads, 0, stream()>>>(out.numel(), R, C, rows, in.stride(-1),
                                                                      ptr<T>(out), ptr<const T>(in), k, upper);
    CUDA_CHECK_LAUNCH(upper ? "triu" : "tril");
  });
}

}  // namespace mdl::cuda
