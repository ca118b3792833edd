// CPU kernels of the fused ReLU(2x2 / stride 2 max pool) (kernels/pool.h). The forward reads x once
// and writes the rectified maxima and a byte per window: the winner's place (2 * row + column), or
// kPoolReluBlocked where the ReLU passes no gradient. That is an eighth of max pool's int64
// indices, and no separate ReLU pass forward or backward. The backward writes each input gradient
// once, the window's gradient at its winner and +0 elsewhere: no zeroed plane, no scatter, no
// rounding (the values are copied). Threads split the (n, c) planes. f32 and bf16 planes with
// unit-stride rows run on AVX-512 where the GEMM does (cpu/pool_relu_avx512.cpp); the rest run the
// loops here: max pool's visiting order and NaN rule (a later candidate wins when greater, or
// NaN), then relu's (NaN stays NaN).
#include <algorithm>
#include <type_traits>

#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "cpu/pool_relu_rows.h"
#include "kernels/pool.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

// One plane: x's rows at stride s2 and columns at stride s3; out and codes (Ho, Wo) contiguous.
template <class T>
void forward_plane(const T* x, int64_t s2, int64_t s3, int64_t Ho, int64_t Wo, T* out, uint8_t* codes) {
  using A = acc_t<T>;
  for (int64_t oh = 0; oh < Ho; ++oh) {
    const T* r0 = x + 2 * oh * s2;
    const T* r1 = r0 + s2;
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const int64_t w = 2 * ow * s3;
      A best = A(r0[w]);
      uint8_t place = 0;
      auto visit = [&](A v, uint8_t at) {
        const bool take = (v > best) | (v != v);
        best = take ? v : best;
        place = take ? at : place;
      };
      visit(A(r0[w + s3]), 1);
      visit(A(r1[w]), 2);
      visit(A(r1[w + s3]), 3);
      const bool pass = !(best <= A(0));  // > 0, or NaN
      out[oh * Wo + ow] = pass ? T(best) : T(A(0));
      codes[oh * Wo + ow] = pass ? place : kernels::kPoolReluBlocked;
    }
  }
}

// One plane of grad_x (H, W) from grad_out and codes (Ho, Wo), all contiguous.
template <class T>
void backward_plane(const T* g, const uint8_t* codes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, T* gx) {
  using A = acc_t<T>;
  const T zero = T(A(0));
  for (int64_t oh = 0; oh < Ho; ++oh) {
    T* d0 = gx + 2 * oh * W;
    T* d1 = d0 + W;
    for (int64_t ow = 0; ow < Wo; ++ow) {
      const T v = T(A(g[oh * Wo + ow]) + A(0));  // -0 as +0, as a sum into a zeroed plane gives it
      const uint8_t c = codes[oh * Wo + ow];
      d0[2 * ow] = c == 0 ? v : zero;
      d0[2 * ow + 1] = c == 1 ? v : zero;
      d1[2 * ow] = c == 2 ? v : zero;
      d1[2 * ow + 1] = c == 3 ? v : zero;
    }
    if (W % 2) d0[W - 1] = d1[W - 1] = zero;
  }
  if (H % 2) std::fill(gx + (H - 1) * W, gx + H * W, zero);
}

// Calls f(q) for each of `planes` planes, threaded; work: the cost of one plane.
template <class F>
void for_planes(int64_t planes, int64_t work, const F& f) {
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) f(q);
  });
}

bool avx512_planes() { return gemm_f32_kernel() == GemmKernel::avx512; }

}  // namespace

void max_pool2x2_relu_forward(const Tensor& out, const Tensor& codes, const Tensor& x) {
  const int64_t C = x.size(1), Ho = out.size(2), Wo = out.size(3), plane = Ho * Wo;
  if (out.numel() == 0) return;
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2), s3 = x.stride(3);
  const bool wide = s3 == 1 && avx512_planes();
  dispatch_floating(x.dtype(), "max_pool2d_relu", [&]<class T>() {
    const T* xp = static_cast<const T*>(x.raw_data());
    T* op = out.data_ptr<T>();
    uint8_t* cp = codes.data_ptr<uint8_t>();
    for_planes(out.size(0) * C, 5 * plane, [&](int64_t q) {
      const T* xq = xp + (q / C) * s0 + (q % C) * s1;
      T* oq = op + q * plane;
      uint8_t* cq = cp + q * plane;
      if constexpr (std::is_same_v<T, float>) {
        if (wide) return detail::max_pool_2x2_relu_plane_avx512(xq, s2, Ho, Wo, oq, cq);
      } else if constexpr (std::is_same_v<T, BFloat16>) {
        if (wide)
          return detail::max_pool_2x2_relu_plane_avx512(reinterpret_cast<const uint16_t*>(xq), s2, Ho, Wo,
                                                        reinterpret_cast<uint16_t*>(oq), cq);
      }
      forward_plane(xq, s2, s3, Ho, Wo, oq, cq);
    });
  });
}

void max_pool2x2_relu_backward(const Tensor& gx, const Tensor& go, const Tensor& codes) {
  const int64_t C = gx.size(1), H = gx.size(2), W = gx.size(3), Ho = go.size(2), Wo = go.size(3);
  if (gx.numel() == 0) return;
  const bool wide = avx512_planes();
  dispatch_floating(gx.dtype(), "max_pool2d_relu_backward", [&]<class T>() {
    const T* gp = go.data_ptr<T>();
    const uint8_t* cp = codes.data_ptr<uint8_t>();
    T* dp = gx.data_ptr<T>();
    for_planes(gx.size(0) * C, H * W + Ho * Wo, [&](int64_t q) {
      const T* gq = gp + q * Ho * Wo;
      const uint8_t* cq = cp + q * Ho * Wo;
      T* dq = dp + q * H * W;
      if constexpr (std::is_same_v<T, float>) {
        if (wide) return detail::max_pool_2x2_relu_backward_plane_avx512(gq, cq, H, W, Ho, Wo, dq);
      } else if constexpr (std::is_same_v<T, BFloat16>) {
        if (wide)
          return detail::max_pool_2x2_relu_backward_plane_avx512(reinterpret_cast<const uint16_t*>(gq), cq, H, W, Ho,
                                                                 Wo, reinterpret_cast<uint16_t*>(dq));
      }
      backward_plane(gq, cq, H, W, Ho, Wo, dq);
    });
  });
}

}  // namespace mdl::cpu
