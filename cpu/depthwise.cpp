// Direct depthwise convolution (groups == Cin, Cout = Cin * mult), forward and backward: each
// output plane is kH * kW shifted, scaled copies of one input plane, with no unfolding (im2col
// would make GEMMs with M = 1). Vectorised loops, compiled for AVX2 when the CPU has it.
#include <algorithm>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "kernels/conv.h"
#include "kernels/views.h"
#include "cpu/conv.h"
#include "tensor/parallel.h"


namespace mdl::cpu {

namespace {

#define MDL_INLINE [[gnu::always_inline]] inline

// Runs k(begin, end) over [0, n) on the threads, the loops compiled for AVX2 when available.
template <class K>
#if defined(__x86_64__) || defined(__i386__)
[[gnu::target("avx2,fma")]]
#endif
void run_avx2(const K& k, int64_t b, int64_t e) {
  k(b, e);
}
template <class K>
void run_plain(const K& k, int64_t b, int64_t e) {
  k(b, e);
}
template <class K>
void run(const K& k, int64_t n, int64_t work_per_item) {
  parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work_per_item, 1)), [&](int64_t b, int64_t e) {
    if (has_avx2_fma()) run_avx2(k, b, e);
    else run_plain(k, b, e);
  });
}

// Each plane is first copied into a zero-padded buffer, so the inner loops have no bounds checks;
// at stride 1 the buffer's rows are laid end to end and a whole plane is one long loop (the
// columns past Wo are computed and dropped). The input gradient at stride 1 is the same
// correlation of the padded output gradient with the flipped kernel; at other strides it is scattered.
//
// One plane correlation: out[oh][ow] = sum over taps (ki, kj) of w[ki][kj] *
// in[oh * sh - ph + ki * dh][ow * sw - pw + kj * dw], zero outside in (Hi, Wi). The padded
// buffer (Hb, Wb) holds exactly the input rows and columns the windows reach (ph, pw < 0 crop).
struct Corr {
  int64_t Hi, Wi, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, Hb, Wb;
  Corr(int64_t hi, int64_t wi, int64_t ho, int64_t wo, int64_t kh_, int64_t kw_, int64_t sh_, int64_t sw_, int64_t ph_,
       int64_t pw_, int64_t dh_, int64_t dw_)
      : Hi(hi), Wi(wi), Ho(ho), Wo(wo), kh(kh_), kw(kw_), sh(sh_), sw(sw_), ph(ph_), pw(pw_), dh(dh_), dw(dw_),
        Hb((ho - 1) * sh_ + dh_ * (kh_ - 1) + 1), Wb((wo - 1) * sw_ + dw_ * (kw_ - 1) + 1) {}
  bool flat() const { return sh == 1 && sw == 1; }
  int64_t kk() const { return kh * kw; }
  // The buffer, with a zero tail that the flat loop's dropped columns read into.
  int64_t buf_elems() const { return Hb * Wb + dw * (kw - 1) + 1; }
  int64_t tmp_elems() const { return flat() ? Ho * Wb : 0; }
  int64_t offset(int64_t k) const { return (k / kw) * dh * Wb + (k % kw) * dw; }  // of tap k in the flat buffer
};

// buf = the input plane shifted by (ph, pw) into (Hb, Wb), zeros elsewhere and in the tail.
template <class T>
MDL_INLINE void pad_into(const Corr& c, const T* in, T* buf) {
  const int64_t lo = std::clamp<int64_t>(c.pw, 0, c.Wb), hi = std::clamp<int64_t>(c.Wi + c.pw, lo, c.Wb);
  for (int64_t r = 0; r < c.Hb; ++r) {
    T* d = buf + r * c.Wb;
    const int64_t src = r - c.ph;
    if (src < 0 || src >= c.Hi) {
      std::fill(d, d + c.Wb, T(0));
      continue;
    }
    std::fill(d, d + lo, T(0));
    std::copy(in + src * c.Wi + lo - c.pw, in + src * c.Wi + hi - c.pw, d + lo);
    std::fill(d + hi, d + c.Wb, T(0));
  }
  std::fill(buf + c.Hb * c.Wb, buf + c.buf_elems(), T(0));
}

// out (Ho, Wo) = (accumulate ? out : base) + the correlation of buf with w (kh * kw taps).
// KH, KW > 0 unroll the taps for the common kernel sizes; 0 takes them from c.
template <class T, int KH, int KW>
MDL_INLINE void correlate(const Corr& c, const T* __restrict__ buf, const T* w, T* __restrict__ out,
                          T* __restrict__ tmp, T base, bool accumulate) {
  constexpr int KK = KH * KW;
  const int64_t kk = KK > 0 ? KK : c.kk();
  if (c.flat()) {  // one loop over the plane at the buffer's row pitch
    const int64_t L = c.Ho * c.Wb;
    if constexpr (KK > 0) {
      const int64_t rs = c.dh * c.Wb, cs = c.dw;
      for (int64_t i = 0; i < L; ++i) {
        T a = T(0);
#pragma GCC unroll 8
        for (int ki = 0; ki < KH; ++ki)
#pragma GCC unroll 8
          for (int kj = 0; kj < KW; ++kj) a += w[ki * KW + kj] * buf[i + ki * rs + kj * cs];
        tmp[i] = a;
      }
    } else {
      std::fill(tmp, tmp + L, T(0));
      for (int64_t k = 0; k < kk; ++k) {
        const T* b = buf + c.offset(k);
        const T a = w[k];
        for (int64_t i = 0; i < L; ++i) tmp[i] += a * b[i];
      }
    }
    for (int64_t oh = 0; oh < c.Ho; ++oh) {
      T* o = out + oh * c.Wo;
      const T* t = tmp + oh * c.Wb;
      if (accumulate)
        for (int64_t ow = 0; ow < c.Wo; ++ow) o[ow] += t[ow];
      else
        for (int64_t ow = 0; ow < c.Wo; ++ow) o[ow] = base + t[ow];
    }
    return;
  }
  for (int64_t oh = 0; oh < c.Ho; ++oh) {  // strided: row by row, one pass per tap
    T* o = out + oh * c.Wo;
    if (!accumulate) std::fill(o, o + c.Wo, base);
    for (int64_t k = 0; k < kk; ++k) {
      const T* x = buf + (oh * c.sh) * c.Wb + c.offset(k);
      const T a = w[k];
      for (int64_t ow = 0; ow < c.Wo; ++ow) o[ow] += a * x[ow * c.sw];
    }
  }
}

template <class T>
MDL_INLINE void correlate_any(const Corr& c, const T* buf, const T* w, T* out, T* tmp, T base, bool accumulate) {
  if (c.kh == 3 && c.kw == 3) correlate<T, 3, 3>(c, buf, w, out, tmp, base, accumulate);
  else if (c.kh == 5 && c.kw == 5) correlate<T, 5, 5>(c, buf, w, out, tmp, base, accumulate);
  else correlate<T, 0, 0>(c, buf, w, out, tmp, base, accumulate);
}

// sums[j] += dot(a, b[j]) over L elements for G taps at once: G independent accumulators.
template <class T, int G>
MDL_INLINE void dots(const T* __restrict__ a, const T* const* b, int64_t L, double* sums) {
  const T* __restrict__ b0 = b[0];
  const T* __restrict__ b1 = b[G > 1 ? 1 : 0];
  const T* __restrict__ b2 = b[G > 2 ? 2 : 0];
  const T* __restrict__ b3 = b[G > 3 ? 3 : 0];
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t i = 0; i < L; ++i) {
    const T ai = a[i];
    s0 += ai * b0[i];
    if constexpr (G > 1) s1 += ai * b1[i];
    if constexpr (G > 2) s2 += ai * b2[i];
    if constexpr (G > 3) s3 += ai * b3[i];
  }
  const T r[4] = {s0, s1, s2, s3};
  for (int j = 0; j < G; ++j) sums[j] += double(r[j]);
}

// sums[k] += sum over (oh, ow) of g[oh][ow] * buf at tap k, for each tap; sums[kk] += sum of g.
template <class T>
MDL_INLINE void tap_sums(const Corr& c, const T* __restrict__ buf, const T* __restrict__ g, T* __restrict__ gtmp,
                         double* sums) {
  const int64_t kk = c.kk();
  T gs = T(0);
#pragma omp simd reduction(+ : gs)
  for (int64_t i = 0; i < c.Ho * c.Wo; ++i) gs += g[i];
  sums[kk] += double(gs);
  if (c.flat()) {  // g at the buffer's pitch (zeros in the dropped columns), then dots, four taps at a time
    for (int64_t oh = 0; oh < c.Ho; ++oh) {
      std::copy(g + oh * c.Wo, g + (oh + 1) * c.Wo, gtmp + oh * c.Wb);
      std::fill(gtmp + oh * c.Wb + c.Wo, gtmp + (oh + 1) * c.Wb, T(0));
    }
    const int64_t L = c.Ho * c.Wb;
    for (int64_t k = 0; k < kk; k += 4) {
      const T* b[4];
      for (int64_t j = 0; j < 4; ++j) b[j] = buf + c.offset(std::min(k + j, kk - 1));
      switch (std::min<int64_t>(4, kk - k)) {
        case 1: dots<T, 1>(gtmp, b, L, sums + k); break;
        case 2: dots<T, 2>(gtmp, b, L, sums + k); break;
        case 3: dots<T, 3>(gtmp, b, L, sums + k); break;
        default: dots<T, 4>(gtmp, b, L, sums + k); break;
      }
    }
    return;
  }
  for (int64_t k = 0; k < kk; ++k) {
    T s = T(0);
    for (int64_t oh = 0; oh < c.Ho; ++oh) {
      const T* x = buf + (oh * c.sh) * c.Wb + c.offset(k);
      const T* gr = g + oh * c.Wo;
#pragma omp simd reduction(+ : s)
      for (int64_t ow = 0; ow < c.Wo; ++ow) s += gr[ow] * x[ow * c.sw];
    }
    sums[k] += double(s);
  }
}

struct Geom {
  int64_t N, C, H, W, Cout, mult, kh, kw, Ho, Wo;
  Corr fwd;  // x plane -> out plane
  Corr bwd;  // at stride 1: padded grad_out plane -> grad_x plane, with the flipped kernel
  Geom(const Tensor& x, const Tensor& w, const Tensor& out_like, const kernels::Conv2dParams& p)
      : N(x.size(0)), C(x.size(1)), H(x.size(2)), W(x.size(3)), Cout(w.size(0)), mult(w.size(0) / x.size(1)),
        kh(w.size(2)), kw(w.size(3)), Ho(out_like.size(2)), Wo(out_like.size(3)),
        fwd(H, W, Ho, Wo, kh, kw, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w),
        bwd(Ho, Wo, H, W, kh, kw, 1, 1, p.dil_h * (kh - 1) - p.pad_h, p.dil_w * (kw - 1) - p.pad_w, p.dil_h, p.dil_w) {}
};

// Per-thread scratch, allocated before the threads start (one slot when called from inside a
// parallel region, where our loops run on the calling thread alone).
template <class T>
struct Scratch {
  int64_t per;
  bool nested = in_parallel_region();
  std::vector<T> v;
  explicit Scratch(int64_t n) : per(n), v(size_t((nested ? 1 : get_num_threads()) * n)) {}
  T* get() { return v.data() + (nested ? 0 : thread_index()) * per; }
};

// Input planes q = (n, ci) -> the mult output planes of ci.
template <class T>
struct Forward {
  const Geom& g;
  const T *x, *w, *b;
  T* out;
  Scratch<T>& buf;
  Scratch<T>& tmp;
  MDL_INLINE void operator()(int64_t q0, int64_t q1) const {
    T* bp = buf.get();
    T* tp = tmp.get();
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t n = q / g.C, ci = q % g.C;
      pad_into(g.fwd, x + q * g.H * g.W, bp);
      for (int64_t m = 0; m < g.mult; ++m) {
        const int64_t co = ci * g.mult + m;
        correlate_any(g.fwd, bp, w + co * g.kh * g.kw, out + (n * g.Cout + co) * g.Ho * g.Wo, tp, b ? b[co] : T(0),
                      false);
      }
    }
  }
};

// Input planes q = (n, ci) of grad_x, from the mult output-gradient planes of ci.
template <class T>
struct BackwardInput {
  const Geom& g;
  const T *go, *w;
  T* gx;
  Scratch<T>& buf;
  Scratch<T>& tmp;
  MDL_INLINE void operator()(int64_t q0, int64_t q1) const {
    const int64_t kk = g.kh * g.kw;
    T* bp = buf.get();
    T* tp = tmp.get();
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t n = q / g.C, ci = q % g.C;
      T* dx = gx + q * g.H * g.W;  // (H, W)
      if (g.fwd.flat()) {
        T* wf = tp + g.bwd.tmp_elems();  // the kernel flipped in both dims: taps reversed
        for (int64_t m = 0; m < g.mult; ++m) {
          const int64_t co = ci * g.mult + m;
          for (int64_t k = 0; k < kk; ++k) wf[k] = w[co * kk + kk - 1 - k];
          pad_into(g.bwd, go + (n * g.Cout + co) * g.Ho * g.Wo, bp);
          correlate_any(g.bwd, bp, wf, dx, tp, T(0), m > 0);
        }
        continue;
      }
      // Strided: scatter each output gradient through its window into the padded frame, then crop.
      const Corr& c = g.fwd;
      std::fill(bp, bp + c.Hb * c.Wb, T(0));
      for (int64_t m = 0; m < g.mult; ++m) {
        const int64_t co = ci * g.mult + m;
        const T* gp = go + (n * g.Cout + co) * g.Ho * g.Wo;
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t k = 0; k < kk; ++k) {
            T* d = bp + (oh * c.sh) * c.Wb + c.offset(k);
            const T a = w[co * kk + k];
            const T* gr = gp + oh * g.Wo;
            for (int64_t ow = 0; ow < g.Wo; ++ow) d[ow * c.sw] += a * gr[ow];
          }
      }
      for (int64_t ih = 0; ih < g.H; ++ih)
        for (int64_t iw = 0; iw < g.W; ++iw) {
          const int64_t r = ih + c.ph, s = iw + c.pw;
          dx[ih * g.W + iw] = r < c.Hb && s < c.Wb ? bp[r * c.Wb + s] : T(0);
        }
    }
  }
};

// Output channels co of grad_w (Cout, 1, kH, kW) and grad_b (Cout), summing over the batch. Each
// thread walks its channels sample by sample, so memory is read in order.
template <class T>
struct BackwardWeight {
  const Geom& g;
  const T *go, *x;
  T *gw, *gb;
  Scratch<T>& buf;
  Scratch<T>& tmp;
  double* sums;  // (Cout, kH * kW + 1): taps, then the bias
  MDL_INLINE void operator()(int64_t c0, int64_t c1) const {
    const int64_t kk = g.kh * g.kw;
    T* bp = buf.get();
    T* tp = tmp.get();
    std::fill(sums + c0 * (kk + 1), sums + c1 * (kk + 1), 0.0);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t co = c0; co < c1; ++co) {
        if (co == c0 || co % g.mult == 0) pad_into(g.fwd, x + (n * g.C + co / g.mult) * g.H * g.W, bp);
        tap_sums(g.fwd, bp, go + (n * g.Cout + co) * g.Ho * g.Wo, tp, sums + co * (kk + 1));
      }
    for (int64_t co = c0; co < c1; ++co) {
      const double* s = sums + co * (kk + 1);
      if (gw)
        for (int64_t k = 0; k < kk; ++k) gw[co * kk + k] = T(s[k]);
      if (gb) gb[co] = T(s[kk]);
    }
  }
};

template <class F>
void dispatch_conv_type(DType t, const char* op, const F& f) {
  if (t == kF32) f.template operator()<float>();
  else if (t == kF64) f.template operator()<double>();
  else MDL_FAIL(op, ": the CPU kernel takes f32 or f64, got ", t);
}

}  // namespace

void depthwise_conv2d_forward(const Tensor& out, const Tensor& x_, const Tensor& w_, const Tensor& b_,
                              const kernels::Conv2dParams& p) {
  if (out.numel() == 0) return;
  const Tensor x = kernels::contiguous(x_), w = kernels::contiguous(w_),
               b = b_.defined() ? kernels::contiguous(b_) : b_;
  const Geom g(x, w, out, p);
  dispatch_conv_type(out.dtype(), "conv2d", [&]<class T>() {
    Scratch<T> buf(g.fwd.buf_elems()), tmp(g.fwd.tmp_elems());
    Forward<T> k{g,  x.data_ptr<T>(), w.data_ptr<T>(), b.defined() ? b.data_ptr<T>() : nullptr, out.data_ptr<T>(), buf,
                 tmp};
    run(k, g.N * g.C, g.mult * g.Ho * g.Wo * g.kh * g.kw);
  });
}

void depthwise_conv2d_backward(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go_,
                               const Tensor& x_, const Tensor& w_, const kernels::Conv2dParams& p) {
  const Tensor go = kernels::contiguous(go_), x = kernels::contiguous(x_), w = kernels::contiguous(w_);
  const Geom g(x, w, go, p);
  const int64_t kk = g.kh * g.kw;
  dispatch_conv_type(go.dtype(), "conv2d_backward", [&]<class T>() {
    if (gx.defined()) {
      const Corr& c = g.fwd.flat() ? g.bwd : g.fwd;
      Scratch<T> buf(c.buf_elems()), tmp(c.tmp_elems() + kk);
      BackwardInput<T> k{g, go.data_ptr<T>(), w.data_ptr<T>(), gx.data_ptr<T>(), buf, tmp};
      run(k, g.N * g.C, g.mult * (g.Ho * g.Wo * kk + g.H * g.W));
    }
    if (gw.defined() || gb.defined()) {
      Scratch<T> buf(g.fwd.buf_elems()), tmp(g.fwd.tmp_elems());
      std::vector<double> sums(size_t(g.Cout * (kk + 1)));
      BackwardWeight<T> k{g,
                          go.data_ptr<T>(),
                          x.data_ptr<T>(),
                          gw.defined() ? gw.data_ptr<T>() : nullptr,
                          gb.defined() ? gb.data_ptr<T>() : nullptr,
                          buf,
                          tmp,
                          sums.data()};
      run(k, g.Cout, g.N * g.Ho * g.Wo * kk);
    }
  });
}

}  // namespace mdl::cpu
