// CPU kernels of the fused ReLU(2x2 / stride 2 max pool) (kernels/pool.h). The forward reads x once
// and writes the rectified maxima and a byte per window: the winner's place (2 * row + column), or
// kPoolReluBlocked where the ReLU passes no gradient. That is an eighth of max pool's int64
// indices, and no separate ReLU pass forward or backward. The backward writes each input gradient
// once, the window's gradient at its winner and +0 elsewhere: no zeroed plane, no scatter, no
// rounding (the values are copied). Threads split the (n, c) planes. f32 and bf16 planes with
// unit-stride rows run on AVX-512 where the GEMM does (cpu/pool_relu_avx512.cpp); other f32 planes
// take 128-bit vectors, f16 planes are widened to take the f32 ones, the rest plain loops: max pool's visiting order and NaN rule (a later
// candidate wins when greater, or NaN), then relu's (NaN stays NaN).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "cpu/pool_relu_rows.h"
#include "cpu/scratch.h"
#include "cpu/vec4.h"
#include "kernels/pool.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

// The codes of a row pass through 32-bit lanes in blocks of kBlock windows: a loop that stores
// bytes is vectorised 16 windows at a time, so rows of 14 and 7 windows would run scalar, and its
// selects become branches that random data mispredicts.
constexpr int64_t kBlock = 64;

// One plane: x's rows at stride s2 and columns at stride s3 (1 when kUnitColumns, so that the
// compiler can vectorise the row); out and codes (Ho, Wo) contiguous.
template <class T, bool kUnitColumns>
void forward_plane(const T* x, int64_t s2, int64_t column_stride, int64_t Ho, int64_t Wo, T* out, uint8_t* codes) {
  using A = acc_t<T>;
  const int64_t s3 = kUnitColumns ? 1 : column_stride;
  int32_t place[kBlock];
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow0 = 0; ow0 < Wo; ow0 += kBlock) {
      const int64_t n = std::min(kBlock, Wo - ow0);
      const T* r0 = x + 2 * oh * s2 + 2 * ow0 * s3;
      const T* r1 = r0 + s2;
      T* o = out + oh * Wo + ow0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t w = 2 * j * s3;
        A best = A(r0[w]);
        int32_t at = 0;
        auto visit = [&](A v, int32_t k) {
          const bool take = (v > best) | (v != v);
          best = take ? v : best;
          at = take ? k : at;
        };
        visit(A(r0[w + s3]), 1);
        visit(A(r1[w]), 2);
        visit(A(r1[w + s3]), 3);
        const bool pass = !(best <= A(0));  // > 0, or NaN
        o[j] = pass ? T(best) : T(A(0));
        place[j] = pass ? at : kernels::kPoolReluBlocked;
      }
      for (int64_t j = 0; j < n; ++j) codes[oh * Wo + ow0 + j] = uint8_t(place[j]);
    }
}

using vec4::f4;
using vec4::load4;
using vec4::store4;
using i4 = int32_t __attribute__((vector_size(16)));

// An f32 plane with unit-stride rows, 4 windows a step in 128-bit vectors (every x86-64 CPU has
// them): the same visiting order, NaN rule and ReLU as forward_plane. A row's last 1-3 windows are
// the last step of 4 again, overlapping the one before (rows of at least 4 windows), or go through
// zero-padded copies (rows of 1-3), so no window runs scalar.
void forward_plane_f4(const float* x, int64_t s2, int64_t Ho, int64_t Wo, float* out, uint8_t* codes) {
  const f4 zero = {0, 0, 0, 0};
  const i4 blocked = {kernels::kPoolReluBlocked, kernels::kPoolReluBlocked, kernels::kPoolReluBlocked,
                      kernels::kPoolReluBlocked};
  // Windows j..j+3 from 8 values of each row: out and codes of n <= 4 of them.
  auto step = [&](const float* r0, const float* r1, int64_t n, float* o, uint8_t* c) {
    const f4 a = load4(r0), b = load4(r0 + 4), d0 = load4(r1), d1 = load4(r1 + 4);
    f4 best = __builtin_shufflevector(a, b, 0, 2, 4, 6);
    i4 at = {0, 0, 0, 0};
    auto visit = [&](f4 v, int32_t k) {
      const i4 take = (v > best) | (v != v);
      best = take ? v : best;
      at = take ? i4{k, k, k, k} : at;
    };
    visit(__builtin_shufflevector(a, b, 1, 3, 5, 7), 1);
    visit(__builtin_shufflevector(d0, d1, 0, 2, 4, 6), 2);
    visit(__builtin_shufflevector(d0, d1, 1, 3, 5, 7), 3);
    const i4 pass = ~(best <= zero);  // > 0, or NaN
    const f4 v = pass ? best : zero;
    const i4 k = pass ? at : blocked;
    if (n == 4) {
      store4(o, v);
      for (int j = 0; j < 4; ++j) c[j] = uint8_t(k[j]);
      return;
    }
    for (int64_t j = 0; j < n; ++j) o[j] = v[j], c[j] = uint8_t(k[j]);
  };
  for (int64_t oh = 0; oh < Ho; ++oh) {
    const float* r0 = x + 2 * oh * s2;
    const float* r1 = r0 + s2;
    int64_t ow = 0;
    for (; ow + 4 <= Wo; ow += 4) step(r0 + 2 * ow, r1 + 2 * ow, 4, out + oh * Wo + ow, codes + oh * Wo + ow);
    if (ow < Wo && Wo >= 4) {  // the last 4 windows again: the overlap rewrites equal values
      ow = Wo - 4;
      step(r0 + 2 * ow, r1 + 2 * ow, 4, out + oh * Wo + ow, codes + oh * Wo + ow);
    } else if (ow < Wo) {
      const int64_t n = Wo - ow;
      float p0[8] = {}, p1[8] = {};
      std::memcpy(p0, r0 + 2 * ow, size_t(2 * n) * sizeof(float));
      std::memcpy(p1, r1 + 2 * ow, size_t(2 * n) * sizeof(float));
      step(p0, p1, n, out + oh * Wo + ow, codes + oh * Wo + ow);
    }
  }
}

// One plane of grad_x (H, W) from grad_out and codes (Ho, Wo), all contiguous.
template <class T>
void backward_plane(const T* g, const uint8_t* codes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, T* gx) {
  using A = acc_t<T>;
  const T zero = T(A(0));
  int32_t place[kBlock];
  for (int64_t oh = 0; oh < Ho; ++oh) {
    for (int64_t ow0 = 0; ow0 < Wo; ow0 += kBlock) {
      const int64_t n = std::min(kBlock, Wo - ow0);
      for (int64_t j = 0; j < n; ++j) place[j] = codes[oh * Wo + ow0 + j];
      T* d0 = gx + 2 * oh * W + 2 * ow0;
      T* d1 = d0 + W;
      const T* gr = g + oh * Wo + ow0;
      for (int64_t j = 0; j < n; ++j) {
        const T v = T(A(gr[j]) + A(0));  // -0 as +0, as a sum into a zeroed plane gives it
        const int32_t c = place[j];
        d0[2 * j] = c == 0 ? v : zero;
        d0[2 * j + 1] = c == 1 ? v : zero;
        d1[2 * j] = c == 2 ? v : zero;
        d1[2 * j + 1] = c == 3 ? v : zero;
      }
    }
    if (W % 2) gx[(2 * oh + 1) * W - 1] = gx[(2 * oh + 2) * W - 1] = zero;
  }
  if (H % 2) std::fill(gx + (H - 1) * W, gx + H * W, zero);
}

// backward_plane for f32 with 128-bit vectors: 4 windows a step, each input row's pairs
// interleaved from two vectors; a row's last 1-3 windows as forward_plane_f4 takes them.
void backward_plane_f4(const float* g, const uint8_t* codes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, float* gx) {
  const f4 zero = {0, 0, 0, 0};
  // n <= 4 windows from gr and cb: 2n values of each input row to d0 and d1.
  auto step = [&](const float* gr, const uint8_t* cb, int64_t n, float* d0, float* d1) {
    f4 v;
    i4 c;
    if (n == 4) {
      v = load4(gr);
      c = i4{cb[0], cb[1], cb[2], cb[3]};
    } else {
      v = zero;
      c = i4{0, 0, 0, 0};
      for (int64_t j = 0; j < n; ++j) v[j] = gr[j], c[j] = cb[j];
    }
    v += zero;  // -0 as +0, as a sum into a zeroed plane gives it
    const f4 p0 = c == 0 ? v : zero, p1 = c == 1 ? v : zero, p2 = c == 2 ? v : zero, p3 = c == 3 ? v : zero;
    const f4 rows[2][2] = {{__builtin_shufflevector(p0, p1, 0, 4, 1, 5), __builtin_shufflevector(p0, p1, 2, 6, 3, 7)},
                           {__builtin_shufflevector(p2, p3, 0, 4, 1, 5), __builtin_shufflevector(p2, p3, 2, 6, 3, 7)}};
    if (n == 4) {
      std::memcpy(d0, rows[0], 2 * sizeof(f4));
      std::memcpy(d1, rows[1], 2 * sizeof(f4));
      return;
    }
    for (int64_t j = 0; j < 2 * n; ++j) d0[j] = rows[0][j / 4][j % 4], d1[j] = rows[1][j / 4][j % 4];
  };
  for (int64_t oh = 0; oh < Ho; ++oh) {
    float* d0 = gx + 2 * oh * W;
    float* d1 = d0 + W;
    for (int64_t ow = 0; ow < Wo; ow += 4) {
      const int64_t at = Wo >= 4 ? std::min(ow, Wo - 4) : ow;  // a last step of 4 overlapping the one before
      step(g + oh * Wo + at, codes + oh * Wo + at, std::min<int64_t>(4, Wo - at), d0 + 2 * at, d1 + 2 * at);
    }
    if (W % 2) d0[W - 1] = d1[W - 1] = 0.0f;
  }
  if (H % 2) std::fill(gx + (H - 1) * W, gx + H * W, 0.0f);
}

// Calls f(q) for each of `planes` planes, threaded; work: the cost of one plane.
template <class F>
void for_planes(int64_t planes, int64_t work, const F& f) {
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) f(q);
  });
}

bool avx512_planes() { return gemm_f32_kernel() == GemmKernel::avx512; }

// f16 planes through the f32 ones: each plane widened (F16C where the CPU has it), pooled or
// routed as f32, the result narrowed back. Every value out is one of the plane's f16 values or +0,
// so the round trip is exact: the scalar loops' bits, at the f32 planes' speed.
void forward_f16_planes(const Tensor& out, const Tensor& codes, const Tensor& x, bool wide) {
  const int64_t C = x.size(1), Ho = out.size(2), Wo = out.size(3), plane = Ho * Wo;
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2);
  const Half* xp = static_cast<const Half*>(x.raw_data());
  Half* op = out.data_ptr<Half>();
  uint8_t* cp = codes.data_ptr<uint8_t>();
  parallel_for(0, out.size(0) * C, std::max<int64_t>(1, kGrainSize / (5 * plane)), [&](int64_t b, int64_t e) {
    Scratch<float> in(4 * plane), res(plane);
    for (int64_t q = b; q < e; ++q) {
      const Half* xq = xp + (q / C) * s0 + (q % C) * s1;
      for (int64_t r = 0; r < 2 * Ho; ++r) f16_to_f32(xq + r * s2, in.data() + r * 2 * Wo, 2 * Wo);
      if (wide) detail::max_pool_2x2_relu_plane_avx512(in.data(), 2 * Wo, Ho, Wo, res.data(), cp + q * plane);
      else forward_plane_f4(in.data(), 2 * Wo, Ho, Wo, res.data(), cp + q * plane);
      f32_to_f16(res.data(), op + q * plane, plane);
    }
  });
}

void backward_f16_planes(const Tensor& gx, const Tensor& go, const Tensor& codes, bool wide) {
  const int64_t C = gx.size(1), H = gx.size(2), W = gx.size(3), Ho = go.size(2), Wo = go.size(3);
  const Half* gp = go.data_ptr<Half>();
  const uint8_t* cp = codes.data_ptr<uint8_t>();
  Half* dp = gx.data_ptr<Half>();
  parallel_for(0, gx.size(0) * C, std::max<int64_t>(1, kGrainSize / (H * W + Ho * Wo)), [&](int64_t b, int64_t e) {
    Scratch<float> g(Ho * Wo), d(H * W);
    for (int64_t q = b; q < e; ++q) {
      f16_to_f32(gp + q * Ho * Wo, g.data(), Ho * Wo);
      if (wide) detail::max_pool_2x2_relu_backward_plane_avx512(g.data(), cp + q * Ho * Wo, H, W, Ho, Wo, d.data());
      else backward_plane_f4(g.data(), cp + q * Ho * Wo, H, W, Ho, Wo, d.data());
      f32_to_f16(d.data(), dp + q * H * W, H * W);
    }
  });
}

}  // namespace

void max_pool2x2_relu_forward(const Tensor& out, const Tensor& codes, const Tensor& x) {
  const int64_t C = x.size(1), Ho = out.size(2), Wo = out.size(3), plane = Ho * Wo;
  if (out.numel() == 0) return;
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2), s3 = x.stride(3);
  const bool wide = s3 == 1 && avx512_planes();
  if (x.dtype() == kF16 && s3 == 1) return forward_f16_planes(out, codes, x, wide);
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
        if (s3 == 1) return forward_plane_f4(xq, s2, Ho, Wo, oq, cq);
      } else if constexpr (std::is_same_v<T, BFloat16>) {
        if (wide)
          return detail::max_pool_2x2_relu_plane_avx512(reinterpret_cast<const uint16_t*>(xq), s2, Ho, Wo,
                                                        reinterpret_cast<uint16_t*>(oq), cq);
      }
      if (s3 == 1) forward_plane<T, true>(xq, s2, 1, Ho, Wo, oq, cq);
      else forward_plane<T, false>(xq, s2, s3, Ho, Wo, oq, cq);
    });
  });
}

void max_pool2x2_relu_backward(const Tensor& gx, const Tensor& go, const Tensor& codes) {
  const int64_t C = gx.size(1), H = gx.size(2), W = gx.size(3), Ho = go.size(2), Wo = go.size(3);
  if (gx.numel() == 0) return;
  const bool wide = avx512_planes();
  if (gx.dtype() == kF16) return backward_f16_planes(gx, go, codes, wide);
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
        return backward_plane_f4(gq, cq, H, W, Ho, Wo, dq);
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
