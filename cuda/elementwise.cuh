// The elementwise launcher every map-style kernel uses: out[i] = f(in0[i], in1[i], ...) over
// operands of one shape with any strides (0 for broadcast dims). When every operand is one
// contiguous run and 16-byte aligned, each thread loads and stores VEC elements at once
// (16-byte loads of the first input's type); where only the innermost dim is a unit-stride run in
// every operand (a transpose of outer dims, a bias broadcast over rows), VEC elements per thread
// along it (inner_vector_geo); otherwise a grid-stride loop walks Geo offsets, with 32-bit index
// division (kernels/fast_divmod.h) below 2^31 elements.
#pragma once
#include <tuple>
#include <utility>

#include "cuda/common.cuh"

namespace mdl::cuda::detail {

template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <int VEC, class Out, class F, class... In, size_t... I>
__device__ __forceinline__ void map_pack(int64_t v, Out* out, const std::array<const void*, sizeof...(In)>& in,
                                         const F& f, std::index_sequence<I...>) {
  std::tuple<Pack<In, VEC>...> packs{reinterpret_cast<const Pack<In, VEC>*>(in[I])[v]...};
  Pack<Out, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; ++j) o.v[j] = f(std::get<I>(packs).v[j]...);
  reinterpret_cast<Pack<Out, VEC>*>(out)[v] = o;
}

// The same at element offsets off (out's first, then each input's), each the start of an aligned run.
template <int VEC, class Out, class F, class... In, size_t... I>
__device__ __forceinline__ void map_pack_at(const int64_t (&off)[1 + sizeof...(In)], Out* out,
                                            const std::array<const void*, sizeof...(In)>& in, const F& f,
                                            std::index_sequence<I...>) {
  std::tuple<Pack<In, VEC>...> packs{
      *reinterpret_cast<const Pack<In, VEC>*>(static_cast<const In*>(in[I]) + off[I + 1])...};
  Pack<Out, VEC> o;
#pragma unroll
  for (int j = 0; j < VEC; ++j) o.v[j] = f(std::get<I>(packs).v[j]...);
  *reinterpret_cast<Pack<Out, VEC>*>(out + off[0]) = o;
}

template <class Out, class F, class... In, size_t... I>
__device__ __forceinline__ void map_one(int64_t o_off, const int64_t* in_off, Out* out,
                                        const std::array<const void*, sizeof...(In)>& in, const F& f,
                                        std::index_sequence<I...>) {
  out[o_off] = f(static_cast<const In*>(in[I])[in_off[I]]...);
}

template <int VEC, class Out, class F, class... In>
__global__ void map_vec_kernel(int64_t n, Out* out, std::array<const void*, sizeof...(In)> in, F f) {
  const int64_t nv = n / VEC;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += int64_t(gridDim.x) * blockDim.x)
    map_pack<VEC, Out, F, In...>(v, out, in, f, std::index_sequence_for<In...>{});
  // The tail that does not fill a pack.
  const int64_t i = nv * VEC + threadIdx.x;
  if (blockIdx.x == 0 && i < n) {
    int64_t off[sizeof...(In) + 1];
    for (size_t k = 0; k <= sizeof...(In); ++k) off[k] = i;
    map_one<Out, F, In...>(i, off, out, in, f, std::index_sequence_for<In...>{});
  }
}

template <class Out, class F, class... In>
__global__ void map_strided_kernel(int64_t n, Geo<1 + sizeof...(In)> g, Out* out,
                                   std::array<const void*, sizeof...(In)> in, F f) {
  const bool index32 = n <= int64_t(kFastDivmodLimit);  // the same for every thread: no divergence
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1 + sizeof...(In)];
    if (index32) g.offsets32(uint32_t(i), off);
    else g.offsets(i, off);
    map_one<Out, F, In...>(off[0], off + 1, out, in, f, std::index_sequence_for<In...>{});
  }
}

// Vector v of an inner_vector_geo g (nv vectors): its offsets, then VEC elements from each operand.
template <int VEC, class Out, class F, class... In>
__global__ void map_inner_vec_kernel(int64_t nv, Geo<1 + sizeof...(In)> g, Out* out,
                                     std::array<const void*, sizeof...(In)> in, F f) {
  const bool index32 = nv <= int64_t(kFastDivmodLimit);
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[1 + sizeof...(In)];
    if (index32) g.offsets32(uint32_t(v), off);
    else g.offsets(v, off);
    map_pack_at<VEC, Out, F, In...>(off, out, in, f, std::index_sequence_for<In...>{});
  }
}

template <class T>
constexpr int vec_width() {
  constexpr int w = int(16 / sizeof(T));
  return w > 8 ? 8 : w < 1 ? 1 : w;
}

// out and ins: device tensors; f a functor with a __device__ operator()(In...) -> Out of one shape whose element types are Out and In...
template <class Out, class... In, class F>
void launch_map(const char* op, const Tensor& out, std::array<const Tensor*, sizeof...(In)> ins, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  constexpr int NT = 1 + sizeof...(In), NI = sizeof...(In);
  std::array<const Tensor*, NT> all;
  all[0] = &out;
  for (int k = 0; k < NI; ++k) all[size_t(k) + 1] = ins[size_t(k)];
  const Geo<NT> g = make_geo<NT>(op, all);
  std::array<const void*, sizeof...(In)> in;
  for (int k = 0; k < NI; ++k) in[size_t(k)] = ins[size_t(k)]->raw_data();
  Out* o = ptr<Out>(out);
  using First = std::tuple_element_t<0, std::tuple<In..., Out>>;
  constexpr int VEC = vec_width<First>();
  bool aligned = reinterpret_cast<uintptr_t>(o) % (sizeof(Out) * VEC) == 0;
  if constexpr (sizeof...(In) > 0) {
    size_t k = 0;
    ((aligned = aligned && reinterpret_cast<uintptr_t>(in[k++]) % (sizeof(In) * VEC) == 0), ...);
  }
  Geo<NT> vg;
  if (g.contiguous() && aligned && n >= VEC) {
    map_vec_kernel<VEC, Out, F, In...><<<blocks_for(n / VEC), kThreads, 0, stream()>>>(n, o, in, f);
  } else if (VEC > 1 && aligned && inner_vector_geo(g, VEC, vg)) {
    map_inner_vec_kernel<VEC, Out, F, In...><<<blocks_for(n / VEC), kThreads, 0, stream()>>>(n / VEC, vg, o, in, f);
  } else {
    map_strided_kernel<Out, F, In...><<<blocks_for(n), kThreads, 0, stream()>>>(n, g, o, in, f);
  }
  CUDA_CHECK_LAUNCH(op);
}

}  // namespace mdl::cuda::detail
