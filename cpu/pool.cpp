// CPU pooling: max, average and adaptive average over 2-D windows, forward and backward. Each
// (n, c) plane is independent, so threads split the planes and every backward scatters into its
// own plane only: no atomics, and sums run in a fixed order. f16/bf16 compute in float. The
// common 2x2 / stride 2 max pool runs on vectors: 16 outputs with the row's end masked on AVX-512
// (cpu/pool_rows_avx512.cpp; following the GEMM kernel choice, as the direct conv does), else 4
// floats; bf16 widened in the registers (the winner is one of the inputs, so it goes back
// exactly), f16 rows converted in blocks.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/scratch.h"
#include "kernels/convert.h"
#include "cpu/float_block.h"
#include "cpu/gemm.h"
#include "cpu/pool_rows.h"
#include "kernels/pool.h"
#include "kernels/pool_windows.h"
#include "switches/list/toggles.h"
#include "tensor/parallel.h"


namespace mdl::cpu {

namespace {

// Element (n, c, h, w) of a 4-D tensor of any strides.
struct Strided4 {
  int64_t s[4];
  explicit Strided4(const Tensor& t) {
    for (int d = 0; d < 4; ++d) s[d] = t.stride(d);
  }
  int64_t plane(int64_t q, int64_t C) const { return (q / C) * s[0] + (q % C) * s[1]; }
};

// Calls f(q) for each of the N * C planes, threaded; `work` is the cost of one plane.
template <class F>
void for_planes(int64_t planes, int64_t work, const F& f) {
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) f(q);
  });
}

// Calls scatter(q, acc) for each plane q of a backward into d (planes of hw values, contiguous),
// acc zeroed first: the plane itself for f32/f64. For f16/bf16, acc is a float plane of a
// per-thread block of planes, rounded into d together once the whole block is scattered: a plane
// read back in vectors right after its scalar stores waits for them to leave the store buffer (a
// 14x14 bf16 max pool backward ran at a quarter of f32's speed on Zen 5, rounding plane by plane).
template <class T, class F>
void backward_planes(int64_t planes, int64_t hw, int64_t work, T* d, const F& scatter) {
  using A = acc_t<T>;
  constexpr bool kInPlace = std::is_same_v<T, A>;
  const int64_t block = kInPlace ? 1 : std::clamp<int64_t>(int64_t(8192) / std::max<int64_t>(hw, 1), 1, 16);
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    Scratch<A> buf(kInPlace ? 0 : block * hw);
    for (int64_t q0 = b; q0 < e; q0 += block) {
      const int64_t q1 = std::min(e, q0 + block);
      for (int64_t q = q0; q < q1; ++q) {
        A* acc = nullptr;
        if constexpr (kInPlace) acc = d + q * hw;
        else acc = buf.data() + (q - q0) * hw;
        std::fill(acc, acc + hw, A(0));
        scatter(q, acc);
      }
      if constexpr (!kInPlace) from_f32(buf.data(), d + q0 * hw, (q1 - q0) * hw);
    }
  });
}

using f4 = float __attribute__((vector_size(16)));
using i4 = int32_t __attribute__((vector_size(16)));
using h4 = uint16_t __attribute__((vector_size(8)));
using h8 = uint16_t __attribute__((vector_size(16)));
using i64x4 = int64_t __attribute__((vector_size(32)));

// 4 elements of a float or bf16 row as floats, and back: a bf16 value is the high half of its
// float, and a float that holds one goes back exactly.
inline f4 load4(const float* p) {
  f4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline f4 load4(const BFloat16* p) {
  h4 h;
  std::memcpy(&h, p, sizeof h);
  const h4 zero = {};
  return reinterpret_cast<f4>(__builtin_shufflevector(zero, h, 0, 4, 1, 5, 2, 6, 3, 7));
}
inline void store4(float* p, f4 v) { std::memcpy(p, &v, sizeof v); }
inline void store4(BFloat16* p, f4 v) {
  const h8 halves = reinterpret_cast<h8>(v);
  const h4 h = __builtin_shufflevector(halves, halves, 1, 3, 5, 7);
  std::memcpy(static_cast<void*>(p), &h, sizeof h);
}

// One output row of the 2x2 / stride 2 max pool on floats or bf16, 4 outputs at a time: rows r0
// and r1 (unit stride) are split into even and odd columns by shuffles, and each window's winner
// is a select, in the scalar loop's visiting order and NaN rule. base is r0's first element's
// index in the plane (of width W); a row of Wo >= 4 outputs ends with a vector that overlaps the
// one before it, which recomputes the same values.
template <class T>
void max_pool_2x2_row(const T* r0, const T* r1, int64_t base, int64_t W, int64_t Wo, T* out, int64_t* idx) {
  for (int64_t ow = 0;; ow += 4) {
    if (ow + 4 > Wo) ow = Wo - 4;
    const f4 a = load4(r0 + 2 * ow), b = load4(r0 + 2 * ow + 4), c = load4(r1 + 2 * ow), d = load4(r1 + 2 * ow + 4);
    const i4 at = i4{0, 2, 4, 6} + int32_t(base + 2 * ow);
    f4 best = __builtin_shufflevector(a, b, 0, 2, 4, 6);
    i4 arg = at;
    auto visit = [&](f4 v, i4 cand) {
      const i4 take = (v > best) | (v != v);
      best = take ? v : best;
      arg = take ? cand : arg;
    };
    visit(__builtin_shufflevector(a, b, 1, 3, 5, 7), at + 1);
    visit(__builtin_shufflevector(c, d, 0, 2, 4, 6), at + int32_t(W));
    visit(__builtin_shufflevector(c, d, 1, 3, 5, 7), at + int32_t(W + 1));
    store4(out + ow, best);
    const i64x4 arg64 = __builtin_convertvector(arg, i64x4);
    std::memcpy(idx + ow, &arg64, sizeof arg64);
    if (ow + 4 >= Wo) break;
  }
}

// One output row of the 2x2 / stride 2 max pool, element by element; branch-free selects so the
// loop vectorises. The same arguments as max_pool_2x2_row.
template <class T>
void max_pool_2x2_row_scalar(const T* r0, const T* r1, int64_t base, int64_t W, int64_t Wo, T* out, int64_t* idx) {
  using A = acc_t<T>;
  for (int64_t ow = 0; ow < Wo; ++ow) {
    const int64_t w = 2 * ow;
    A best = A(r0[w]);
    int64_t arg = base + w;
    auto visit = [&](A v, int64_t at) {
      const bool take = (v > best) | (v != v);
      best = take ? v : best;
      arg = take ? at : arg;
    };
    visit(A(r0[w + 1]), base + w + 1);
    visit(A(r1[w]), base + W + w);
    visit(A(r1[w + 1]), base + W + w + 1);
    out[ow] = T(best);
    idx[ow] = arg;
  }
}

}  // namespace


void max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& x, const kernels::Pool2dParams& p) {
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  if (out.numel() == 0) return;
  const Strided4 xs(x);
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.raw_data());
    T* op = out.data_ptr<T>();
    int64_t* ip = indices.data_ptr<int64_t>();
    // The common 2x2 / stride 2 / no padding window over rows with unit stride, without the
    // window arithmetic; the same visiting order and NaN rule as the general loop below.
    const bool two_by_two = p.kernel_h == 2 && p.kernel_w == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_h == 0 &&
                            p.pad_w == 0 && xs.s[3] == 1;
    if (two_by_two) {
      const bool vectorize = toggles::max_pool_vectorized() && H * W <= INT32_MAX;
      const bool wide = vectorize && gemm_f32_kernel() == GemmKernel::avx512;
      auto vector_row = [&]<class V>(const V* r0, const V* r1, int64_t base, int64_t wo, V* o, int64_t* i) {
        if constexpr (std::is_same_v<V, float>)
          if (wide) return detail::max_pool_2x2_row_avx512(r0, r1, base, W, wo, o, i);
        if constexpr (std::is_same_v<V, BFloat16>)
          if (wide)
            return detail::max_pool_2x2_row_avx512(reinterpret_cast<const uint16_t*>(r0),
                                                   reinterpret_cast<const uint16_t*>(r1), base, W, wo,
                                                   reinterpret_cast<uint16_t*>(o), i);
        if (vectorize && wo >= 4) return max_pool_2x2_row(r0, r1, base, W, wo, o, i);
        max_pool_2x2_row_scalar(r0, r1, base, W, wo, o, i);
      };
      for_planes(out.size(0) * C, Ho * Wo * 4, [&](int64_t q) {
        const T* xq = xp + xs.plane(q, C);
        T* oq = op + q * Ho * Wo;
        int64_t* iq = ip + q * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const T* r0 = xq + 2 * oh * xs.s[2];
          const T* r1 = r0 + xs.s[2];
          const int64_t base = 2 * oh * W;
          if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
            vector_row(r0, r1, base, Wo, oq + oh * Wo, iq + oh * Wo);
          } else if constexpr (std::is_same_v<T, Half>) {  // through float blocks of 128 outputs
            constexpr int64_t kOut = kFloatBlock / 2;
            float a[kFloatBlock], b[kFloatBlock], o[kOut];
            for (int64_t ow = 0; ow < Wo; ow += kOut) {
              const int64_t n = std::min(kOut, Wo - ow);
              load_floats<T>(reinterpret_cast<const char*>(r0 + 2 * ow), sizeof(T), a, 2 * n);
              load_floats<T>(reinterpret_cast<const char*>(r1 + 2 * ow), sizeof(T), b, 2 * n);
              vector_row(a, b, base + 2 * ow, n, o, iq + oh * Wo + ow);
              store_floats<T>(reinterpret_cast<char*>(oq + oh * Wo + ow), sizeof(T), o, n);
            }
          } else {
            max_pool_2x2_row_scalar(r0, r1, base, W, Wo, oq + oh * Wo, iq + oh * Wo);
          }
        }
      });
      return;
    }
    for_planes(out.size(0) * C, Ho * Wo * p.kernel_h * p.kernel_w, [&](int64_t q) {
      const T* xq = xp + xs.plane(q, C);
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const PoolWindow wh = pool_window(oh, p.stride_h, p.pad_h, p.kernel_h, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const PoolWindow ww = pool_window(ow, p.stride_w, p.pad_w, p.kernel_w, W);
          A best = -std::numeric_limits<A>::infinity();
          int64_t arg = wh.lo * W + ww.lo;
          for (int64_t h = wh.lo; h < wh.hi; ++h)
            for (int64_t w = ww.lo; w < ww.hi; ++w) {
              const A v = A(xq[h * xs.s[2] + w * xs.s[3]]);
              if (v > best || std::isnan(v)) {
                best = v;
                arg = h * W + w;
              }
            }
          op[(q * Ho + oh) * Wo + ow] = T(best);
          ip[(q * Ho + oh) * Wo + ow] = arg;
        }
      }
    });
  });
}

void max_pool2d_backward(const Tensor& gx, const Tensor& go, const Tensor& indices) {
  const int64_t C = gx.size(1), HW = gx.size(2) * gx.size(3), Ho = go.size(2), Wo = go.size(3);
  if (gx.numel() == 0) return;
  const Strided4 gs(go), is(indices);
  dispatch_floating(gx.dtype(), "max_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(go.raw_data());
    const int64_t* ip = static_cast<const int64_t*>(indices.raw_data());
    T* dp = gx.data_ptr<T>();
    backward_planes(gx.size(0) * C, HW, HW + Ho * Wo, dp, [&](int64_t q, A* acc) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const T* g = gp + gs.plane(q, C) + oh * gs.s[2];  // (Wo) at stride gs.s[3]
        const int64_t* i = ip + is.plane(q, C) + oh * is.s[2];
        if constexpr (std::is_same_v<T, Half>) {
          float gf[kFloatBlock];
          for (int64_t ow = 0; ow < Wo; ow += kFloatBlock) {
            const int64_t n = std::min(kFloatBlock, Wo - ow);
            load_floats<T>(reinterpret_cast<const char*>(g + ow * gs.s[3]), gs.s[3] * int64_t(sizeof(T)), gf, n);
            for (int64_t k = 0; k < n; ++k) acc[i[(ow + k) * is.s[3]]] += gf[k];
          }
        } else {
          for (int64_t ow = 0; ow < Wo; ++ow) acc[i[ow * is.s[3]]] += A(g[ow * gs.s[3]]);
        }
      }
    });
  });
}

void avg_pool2d_forward(const Tensor& out, const Tensor& x, const kernels::Pool2dParams& p, bool count_include_pad) {
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  if (out.numel() == 0) return;
  const Strided4 xs(x);
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.raw_data());
    T* op = out.data_ptr<T>();
    for_planes(out.size(0) * C, Ho * Wo * p.kernel_h * p.kernel_w, [&](int64_t q) {
      const T* xq = xp + xs.plane(q, C);
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const PoolWindow wh = pool_window(oh, p.stride_h, p.pad_h, p.kernel_h, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const PoolWindow ww = pool_window(ow, p.stride_w, p.pad_w, p.kernel_w, W);
          A s = 0;
          for (int64_t h = wh.lo; h < wh.hi; ++h)
            for (int64_t w = ww.lo; w < ww.hi; ++w) s += A(xq[h * xs.s[2] + w * xs.s[3]]);
          const int64_t div = count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo);
          op[(q * Ho + oh) * Wo + ow] = T(s / A(div));
        }
      }
    });
  });
}

void avg_pool2d_backward(const Tensor& gx, const Tensor& go, const kernels::Pool2dParams& p, bool count_include_pad) {
  const int64_t C = gx.size(1), H = gx.size(2), W = gx.size(3), Ho = go.size(2), Wo = go.size(3);
  if (gx.numel() == 0) return;
  const Strided4 gs(go);
  dispatch_floating(gx.dtype(), "avg_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(go.raw_data());
    T* dp = gx.data_ptr<T>();
    backward_planes(gx.size(0) * C, H * W, H * W + Ho * Wo * p.kernel_h * p.kernel_w, dp, [&](int64_t q, A* acc) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const PoolWindow wh = pool_window(oh, p.stride_h, p.pad_h, p.kernel_h, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const PoolWindow ww = pool_window(ow, p.stride_w, p.pad_w, p.kernel_w, W);
          const int64_t div = count_include_pad ? wh.padded * ww.padded : (wh.hi - wh.lo) * (ww.hi - ww.lo);
          const A v = A(gp[gs.plane(q, C) + oh * gs.s[2] + ow * gs.s[3]]) / A(div);
          for (int64_t h = wh.lo; h < wh.hi; ++h)
            for (int64_t w = ww.lo; w < ww.hi; ++w) acc[h * W + w] += v;
        }
      }
    });
  });
}

void adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& x) {
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3), Ho = out.size(2), Wo = out.size(3);
  if (out.numel() == 0) return;
  const Strided4 xs(x);
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.raw_data());
    T* op = out.data_ptr<T>();
    for_planes(out.size(0) * C, H * W + Ho * Wo, [&](int64_t q) {
      const T* xq = xp + xs.plane(q, C);
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const PoolWindow wh = adaptive_window(oh, Ho, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const PoolWindow ww = adaptive_window(ow, Wo, W);
          A s = 0;
          for (int64_t h = wh.lo; h < wh.hi; ++h)
            for (int64_t w = ww.lo; w < ww.hi; ++w) s += A(xq[h * xs.s[2] + w * xs.s[3]]);
          op[(q * Ho + oh) * Wo + ow] = T(s / A(wh.padded * ww.padded));
        }
      }
    });
  });
}

void adaptive_avg_pool2d_backward(const Tensor& gx, const Tensor& go) {
  const int64_t C = gx.size(1), H = gx.size(2), W = gx.size(3), Ho = go.size(2), Wo = go.size(3);
  if (gx.numel() == 0) return;
  const Strided4 gs(go);
  dispatch_floating(gx.dtype(), "adaptive_avg_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(go.raw_data());
    T* dp = gx.data_ptr<T>();
    backward_planes(gx.size(0) * C, H * W, H * W + Ho * Wo, dp, [&](int64_t q, A* acc) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const PoolWindow wh = adaptive_window(oh, Ho, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const PoolWindow ww = adaptive_window(ow, Wo, W);
          const A v = A(gp[gs.plane(q, C) + oh * gs.s[2] + ow * gs.s[3]]) / A(wh.padded * ww.padded);
          for (int64_t h = wh.lo; h < wh.hi; ++h)
            for (int64_t w = ww.lo; w < ww.hi; ++w) acc[h * W + w] += v;
        }
      }
    });
  });
}

}  // namespace mdl::cpu
