// What the CUDA kernels share: the device type behind each DType, conversions that match the CPU
// backend's (floats to integers saturate and NaN gives 0; anything to bool is != 0; one rounding
// to f16/bf16), dtype dispatch, and Geo, the strided geometry of up to NT operands passed to a
// kernel by value (dims of size 1 dropped, neighbours contiguous in every operand merged, each
// dim's size with its magic number for 32-bit division).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/core.h"
#include "cuda/runtime/context.cuh"
#include "kernels/convert.h"
#include "kernels/fast_divmod.h"
#include "tensor/tensor.h"

namespace mdl::cuda::detail {

using half = __half;
using bf16 = __nv_bfloat16;

template <class T>
struct acc {
  using type = T;
};
template <>
struct acc<half> {
  using type = float;
};
template <>
struct acc<bf16> {
  using type = float;
};
template <class T>
using acc_t = typename acc<T>::type;
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, half> || std::is_same_v<T, bf16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

template <class T>
__device__ __forceinline__ acc_t<T> to_acc(T x) {
  if constexpr (std::is_same_v<T, half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, bf16>) return __bfloat162float(x);
  else return x;
}

template <class To, class From>
__device__ __forceinline__ To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return to_acc(x) != acc_t<From>(0);
  } else if constexpr (is_half_v<To> && (std::is_same_v<From, double> || std::is_integral_v<From>)) {
    if constexpr (std::is_same_v<To, half>) return __double2half(double(x));  // one rounding
    else return __double2bfloat16(double(x));
  } else if constexpr (std::is_same_v<To, half>) {
    return __float2half_rn(to_acc(x));
  } else if constexpr (std::is_same_v<To, bf16>) {
    return __float2bfloat16_rn(to_acc(x));
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    const double v = double(to_acc(x));
    if (v != v) return To(0);
    if (v <= double(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= double(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(to_acc(x));
  }
}

// The device types behind f16 and bf16, for the dtype dispatchers of tensor/dtype.h:
//   dispatch<DeviceTypes>(t, "op", [&]<class T>() { ... });
struct DeviceTypes {
  using f16 = __half;
  using bf16 = __nv_bfloat16;
};

// Element offsets (in elements of each operand) of the i-th element in row-major order.
template <int NT>
struct Geo {
  int ndim = 0;
  int64_t size[kMaxDimsCuda];
  int64_t stride[NT][kMaxDimsCuda];
  FastDivmod div[kMaxDimsCuda];  // by size[d], where it fits 31 bits (make_geo)

  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[NT]) const {
#pragma unroll
    for (int t = 0; t < NT; ++t) off[t] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t q = i / size[d], r = i - q * size[d];
      i = q;
#pragma unroll
      for (int t = 0; t < NT; ++t) off[t] += r * stride[t][d];
    }
  }
  // The same for i <= kFastDivmodLimit (so is every size, when the tensor has no more elements):
  // a multiply-high and a shift per dim instead of a 64-bit division.
  __device__ __forceinline__ void offsets32(uint32_t i, int64_t (&off)[NT]) const {
#pragma unroll
    for (int t = 0; t < NT; ++t) off[t] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const uint32_t q = div[d].div(i), r = div[d].mod(i, q);
      i = q;
#pragma unroll
      for (int t = 0; t < NT; ++t) off[t] += int64_t(r) * stride[t][d];
    }
  }
  bool contiguous() const {  // one run with unit strides in every operand
    for (int t = 0; t < NT; ++t)
      if (ndim != 1 || stride[t][0] != 1) return false;
    return true;
  }
};

// Operand 0 gives the shape; the others have that shape (expanded beforehand).
template <int NT>
Geo<NT> make_geo(const char* op, const std::array<const Tensor*, NT>& ts) {
  Geo<NT> g;
  const Shape& sh = ts[0]->shape();
  const bool nhwc = walks_channels_last(sh, ts[0]->strides());  // walk a channels-last output in memory order
  for (size_t k = 0; k < sh.size(); ++k) {
    const size_t d = nhwc ? size_t(channels_last_walk()[k]) : k;
    if (sh[d] == 1) continue;
    bool merge = g.ndim > 0;
    for (int t = 0; t < NT && merge; ++t) merge = g.stride[t][g.ndim - 1] == ts[t]->stride(int64_t(d)) * sh[d];
    if (merge) {
      g.size[g.ndim - 1] *= sh[d];
      for (int t = 0; t < NT; ++t) g.stride[t][g.ndim - 1] = ts[t]->stride(int64_t(d));
      continue;
    }
    MDL_CHECK(g.ndim < kMaxDimsCuda, op, ": CUDA kernels take at most ", kMaxDimsCuda,
              " non-mergeable dims, got shape ", shape_str(sh));
    g.size[g.ndim] = sh[d];
    for (int t = 0; t < NT; ++t) g.stride[t][g.ndim] = ts[t]->stride(int64_t(d));
    ++g.ndim;
  }
  if (g.ndim == 0) {
    g.ndim = 1;
    g.size[0] = 1;
    for (int t = 0; t < NT; ++t) g.stride[t][0] = 1;
  }
  for (int d = 0; d < g.ndim; ++d)
    if (g.size[d] <= int64_t(kFastDivmodLimit)) g.div[d] = FastDivmod(uint32_t(g.size[d]));
  return g;
}

// g with its innermost dim read vec elements at a time: where every operand has unit stride there,
// the dim is a multiple of vec long and every other stride (broadcast zeros included) a multiple of
// vec, each vector is one aligned run in every operand, and out walks vectors with the innermost
// size divided by vec (offsets still in elements). A transposed copy whose rows stay contiguous, or
// a bias broadcast over rows, then moves 16 bytes per thread. False (out unset) where not.
template <int NT>
bool inner_vector_geo(const Geo<NT>& g, int vec, Geo<NT>& out) {
  const int last = g.ndim - 1;
  if (g.ndim < 2 || g.size[last] % vec != 0) return false;
  for (int t = 0; t < NT; ++t) {
    if (g.stride[t][last] != 1) return false;
    for (int d = 0; d < last; ++d)
      if (g.stride[t][d] % vec != 0) return false;
  }
  out = g;
  out.size[last] /= vec;
  for (int t = 0; t < NT; ++t) out.stride[t][last] = vec;
  if (out.size[last] <= int64_t(kFastDivmodLimit)) out.div[last] = FastDivmod(uint32_t(out.size[last]));
  return true;
}

// A host value as device type T, rounded as the CPU backend rounds it.
template <class T>
T convert_host(double v) {
  if constexpr (std::is_same_v<T, half>) {
    __half_raw r;
    r.x = cpu::convert<Half>(v).bits;
    return half(r);
  } else if constexpr (std::is_same_v<T, bf16>) {
    __nv_bfloat16_raw r;
    r.x = cpu::convert<BFloat16>(v).bits;
    return bf16(r);
  } else {
    return cpu::convert<T>(v);
  }
}

template <class T>
__device__ __forceinline__ bool negative(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0);
  else return false;
}

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace mdl::cuda::detail
