// CPU softmax and log_softmax along any dim, forward and backward side by side. The input is seen
// as (outer, n, inner) with the softmax over n: inner == 1 runs along contiguous rows, inner > 1
// runs a tile of inner columns at once. f32 (and f16/bf16, converted to f32) rows run SoftmaxRows
// (cpu/softmax_rows.h: 16, 8 or 4 floats), tiles 4-float vectors, each with a polynomial exp; f64
// runs plain loops with std::exp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/softmax_rows_impl.h"
#include "cpu/vec4.h"
#include "kernels/convert.h"
#include "cpu/kernels.h"
#include "switches/list/toggles.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

using namespace vec4;

inline f4 nan_max4(f4 a, f4 x) { return ((x > a) | (x != x)) ? x : a; }

inline double exp_acc(double x) { return std::exp(x); }

template <class A>
inline A nan_max(A a, A x) {
  return ((x > a) | (x != x)) ? x : a;
}

// max over a contiguous row, NaN-propagating.
template <class A>
A row_max(const A* x, int64_t n) {
  A m = -std::numeric_limits<A>::infinity();
  for (int64_t i = 0; i < n; ++i) m = nan_max(m, x[i]);
  return m;
}

// ---- forward: y = softmax(x) or log_softmax(x) ---------------------------------------------------
// Plain loops (f64), then the f32 versions: rows through SoftmaxRows, tiles on 4-float vectors.

// One contiguous row of n.
template <class A>
void softmax_row(const SoftmaxRows&, const A* __restrict x, A* __restrict y, int64_t n, bool log) {
  const A mx = row_max(x, n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const A e = exp_acc(x[i] - mx);
    if (!log) y[i] = e;
    s += e;
  }
  if (log) {
    const A ls = A(std::log(s));
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mx) - ls;
  } else {
    const A inv = A(1.0 / s);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// A tile of w columns: element (k, j) at x[k*xs + j], k < n, softmax over k; w <= kTile.
constexpr int64_t kTile = 1024;

template <class A>
void softmax_tile(const A* x, int64_t xs, A* y, int64_t ys, int64_t n, int64_t w, bool log) {
  for (int64_t j = 0; j < w; ++j) {
    A mx = -std::numeric_limits<A>::infinity();
    for (int64_t k = 0; k < n; ++k) mx = nan_max(mx, x[k * xs + j]);
    double s = 0;
    for (int64_t k = 0; k < n; ++k) {
      const A e = exp_acc(x[k * xs + j] - mx);
      if (!log) y[k * ys + j] = e;
      s += e;
    }
    const A r = A(log ? std::log(s) : 1.0 / s);
    for (int64_t k = 0; k < n; ++k) {
      if (log) y[k * ys + j] = (x[k * xs + j] - mx) - r;
      else y[k * ys + j] *= r;
    }
  }
}

// Exp sums run in float within blocks of this many terms, then fold into double.
constexpr int64_t kSumBlock = 256;

void softmax_row(const SoftmaxRows& rows, const float* x, float* y, int64_t n, bool log) { rows.forward(x, y, n, log); }

void softmax_tile(const float* x, int64_t xs, float* y, int64_t ys, int64_t n, int64_t w, bool log) {
  const int64_t w4 = w / 4, nb = (n + kSumBlock - 1) / kSumBlock;
  f4 mx[kTile / 4], part[kTile / 4], r[kTile / 4];
  double s[kTile];
  for (int64_t v = 0; v < w4; ++v) mx[v] = splat(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < 4 * w4; ++j) s[j] = 0;
  for (int64_t k = 0; k < n; ++k)
    for (int64_t v = 0; v < w4; ++v) mx[v] = nan_max4(mx[v], load4(x + k * xs + 4 * v));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t v = 0; v < w4; ++v) part[v] = f4{};
    for (int64_t k = b * kSumBlock; k < std::min(n, (b + 1) * kSumBlock); ++k)
      for (int64_t v = 0; v < w4; ++v) {
        const f4 e = exp4(load4(x + k * xs + 4 * v) - mx[v]);
        if (!log) store4(y + k * ys + 4 * v, e);
        part[v] += e;
      }
    for (int64_t v = 0; v < w4; ++v)
      for (int l = 0; l < 4; ++l) s[4 * v + l] += part[v][l];
  }
  for (int64_t v = 0; v < w4; ++v)
    for (int l = 0; l < 4; ++l) r[v][l] = float(log ? std::log(s[4 * v + l]) : 1.0 / s[4 * v + l]);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t v = 0; v < w4; ++v) {
      float* yk = y + k * ys + 4 * v;
      if (log) store4(yk, (load4(x + k * xs + 4 * v) - mx[v]) - r[v]);
      else store4(yk, load4(yk) * r[v]);
    }
  if (const int64_t t = w - 4 * w4; t > 0) {  // the last 1-3 columns, padded to a vector
    std::vector<float> bx(size_t(4 * n), 0.0f), by(size_t(4 * n));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t l = 0; l < t; ++l) bx[size_t(4 * k + l)] = x[k * xs + 4 * w4 + l];
    softmax_tile(bx.data(), int64_t(4), by.data(), int64_t(4), n, int64_t(4), log);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t l = 0; l < t; ++l) y[k * ys + 4 * w4 + l] = by[size_t(4 * k + l)];
  }
}

// ---- backward: softmax gi = y * (g - sum(g * y)); log_softmax gi = g - exp(y) * sum(g) ------------

template <class A>
void softmax_backward_row(const SoftmaxRows&, const A* __restrict g, const A* __restrict y, A* __restrict gi, int64_t n,
                          bool log) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += log ? g[i] : g[i] * y[i];
  const A r = A(s);
  for (int64_t i = 0; i < n; ++i) gi[i] = log ? g[i] - exp_acc(y[i]) * r : y[i] * (g[i] - r);
}

template <class A>
void softmax_backward_tile(const A* g, const A* y, int64_t xs, A* gi, int64_t ys, int64_t n, int64_t w, bool log) {
  for (int64_t j = 0; j < w; ++j) {
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += log ? g[k * xs + j] : g[k * xs + j] * y[k * xs + j];
    const A r = A(s);
    for (int64_t k = 0; k < n; ++k) {
      const A gk = g[k * xs + j], yk = y[k * xs + j];
      gi[k * ys + j] = log ? gk - exp_acc(yk) * r : yk * (gk - r);
    }
  }
}

void softmax_backward_row(const SoftmaxRows& rows, const float* g, const float* y, float* gi, int64_t n, bool log) {
  rows.backward(g, y, gi, n, log);
}

void softmax_backward_tile(const float* g, const float* y, int64_t xs, float* gi, int64_t ys, int64_t n, int64_t w,
                           bool log) {
  const int64_t w4 = w / 4, nb = (n + kSumBlock - 1) / kSumBlock;
  f4 part[kTile / 4], r[kTile / 4];
  double s[kTile];
  for (int64_t j = 0; j < 4 * w4; ++j) s[j] = 0;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t v = 0; v < w4; ++v) part[v] = f4{};
    for (int64_t k = b * kSumBlock; k < std::min(n, (b + 1) * kSumBlock); ++k)
      for (int64_t v = 0; v < w4; ++v) {
        const f4 gk = load4(g + k * xs + 4 * v);
        part[v] += log ? gk : gk * load4(y + k * xs + 4 * v);
      }
    for (int64_t v = 0; v < w4; ++v)
      for (int l = 0; l < 4; ++l) s[4 * v + l] += part[v][l];
  }
  for (int64_t v = 0; v < w4; ++v)
    for (int l = 0; l < 4; ++l) r[v][l] = float(s[4 * v + l]);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t v = 0; v < w4; ++v) {
      const f4 gk = load4(g + k * xs + 4 * v), yk = load4(y + k * xs + 4 * v);
      store4(gi + k * ys + 4 * v, log ? gk - exp4(yk) * r[v] : yk * (gk - r[v]));
    }
  if (const int64_t t = w - 4 * w4; t > 0) {
    std::vector<float> bg(size_t(4 * n), 0.0f), by(size_t(4 * n), 0.0f), bi(size_t(4 * n));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t l = 0; l < t; ++l) {
        bg[size_t(4 * k + l)] = g[k * xs + 4 * w4 + l];
        by[size_t(4 * k + l)] = y[k * xs + 4 * w4 + l];
      }
    softmax_backward_tile(bg.data(), by.data(), int64_t(4), bi.data(), int64_t(4), n, int64_t(4), log);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t l = 0; l < t; ++l) gi[k * ys + 4 * w4 + l] = bi[size_t(4 * k + l)];
  }
}

// ---- driving both over (outer, n, inner) ----------------------------------------------------------

struct Geometry {
  int64_t outer = 1, n = 1, inner = 1;
};

Geometry geometry(const Tensor& t, int64_t dim) {
  Geometry g;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) g.outer *= t.size(d);
    else if (d == dim) g.n = t.size(d);
    else g.inner *= t.size(d);
  }
  return g;
}

template <class T>
void to_acc(const T* src, acc_t<T>* dst, int64_t n) {
  if constexpr (is_half_v<T>) to_f32(src, dst, n);
  else std::copy(src, src + n, dst);
}

template <class T>
void from_acc(const acc_t<T>* src, T* dst, int64_t n) {
  if constexpr (is_half_v<T>) from_f32(src, dst, n);
  else std::copy(src, src + n, dst);
}

// Columns per tile: up to kTile (wide tiles stream rows; narrow ones thrash the cache on
// power-of-two strides), fewer when f16/bf16 stage n rows of them in float.
template <class T>
int64_t tile_width(const Geometry& g) {
  const int64_t w = std::min(g.inner, kTile);
  if constexpr (is_half_v<T>) return std::min(w, std::max<int64_t>(4, (int64_t(1) << 18) / std::max<int64_t>(g.n, 1)));
  return w;
}

// Calls f(o, j0, w) over the (outer row, column tile) work items, in parallel.
template <class F>
void for_tiles(const Geometry& g, int64_t w, int64_t cost_per_elem, const F& f) {
  const int64_t tiles = (g.inner + w - 1) / w;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / (cost_per_elem * g.n * w));
  parallel_for(0, g.outer * tiles, grain, [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t j0 = it % tiles * w;
      f(it / tiles, j0, std::min(w, g.inner - j0));
    }
  });
}

template <class T>
void softmax_impl(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  using A = acc_t<T>;
  const Geometry g = geometry(in, dim);
  const T* x = static_cast<const T*>(in.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  if (g.inner == 1) {
    const SoftmaxRows& rows = softmax_rows();
    parallel_for(0, g.outer, std::max<int64_t>(1, kGrainSize / (4 * g.n)), [&](int64_t b, int64_t e) {
      if constexpr (is_half_v<T>) {
        std::vector<A> xa(g.n), ya(g.n);
        for (int64_t o = b; o < e; ++o) {
          to_acc(x + o * g.n, xa.data(), g.n);
          softmax_row(rows, xa.data(), ya.data(), g.n, log);
          from_acc(ya.data(), y + o * g.n, g.n);
        }
      } else {
        for (int64_t o = b; o < e; ++o) softmax_row(rows, x + o * g.n, y + o * g.n, g.n, log);
      }
    });
    return;
  }
  const int64_t w = tile_width<T>(g);
  for_tiles(g, w, 4, [&](int64_t o, int64_t j0, int64_t wj) {
    const int64_t off = o * g.n * g.inner + j0;
    if constexpr (is_half_v<T>) {
      std::vector<A> xa(g.n * wj), ya(g.n * wj);
      for (int64_t k = 0; k < g.n; ++k) to_acc(x + off + k * g.inner, xa.data() + k * wj, wj);
      softmax_tile(xa.data(), wj, ya.data(), wj, g.n, wj, log);
      for (int64_t k = 0; k < g.n; ++k) from_acc(ya.data() + k * wj, y + off + k * g.inner, wj);
    } else {
      softmax_tile(x + off, g.inner, y + off, g.inner, g.n, wj, log);
    }
  });
}

template <class T>
void softmax_backward_impl(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log) {
  using A = acc_t<T>;
  const Geometry g = geometry(out, dim);
  const T* go = static_cast<const T*>(grad_out.raw_data());
  const T* y = static_cast<const T*>(out.raw_data());
  T* gi = static_cast<T*>(grad_in.raw_data());
  if (g.inner == 1) {
    const SoftmaxRows& rows = softmax_rows();
    parallel_for(0, g.outer, std::max<int64_t>(1, kGrainSize / (2 * g.n)), [&](int64_t b, int64_t e) {
      if constexpr (is_half_v<T>) {
        std::vector<A> ga(g.n), ya(g.n), ia(g.n);
        for (int64_t o = b; o < e; ++o) {
          to_acc(go + o * g.n, ga.data(), g.n);
          to_acc(y + o * g.n, ya.data(), g.n);
          softmax_backward_row(rows, ga.data(), ya.data(), ia.data(), g.n, log);
          from_acc(ia.data(), gi + o * g.n, g.n);
        }
      } else {
        for (int64_t o = b; o < e; ++o) softmax_backward_row(rows, go + o * g.n, y + o * g.n, gi + o * g.n, g.n, log);
      }
    });
    return;
  }
  const int64_t w = tile_width<T>(g);
  for_tiles(g, w, 2, [&](int64_t o, int64_t j0, int64_t wj) {
    const int64_t off = o * g.n * g.inner + j0;
    if constexpr (is_half_v<T>) {
      std::vector<A> ga(g.n * wj), ya(g.n * wj), ia(g.n * wj);
      for (int64_t k = 0; k < g.n; ++k) {
        to_acc(go + off + k * g.inner, ga.data() + k * wj, wj);
        to_acc(y + off + k * g.inner, ya.data() + k * wj, wj);
      }
      softmax_backward_tile(ga.data(), ya.data(), wj, ia.data(), wj, g.n, wj, log);
      for (int64_t k = 0; k < g.n; ++k) from_acc(ia.data() + k * wj, gi + off + k * g.inner, wj);
    } else {
      softmax_backward_tile(go + off, y + off, g.inner, gi + off, g.inner, g.n, wj, log);
    }
  });
}

const char* op_name(bool log) { return log ? "log_softmax" : "softmax"; }

void check_args(const char* name, const Tensor& out, const Tensor& in, int64_t dim) {
  MDL_CHECK(dim >= 0 && dim < std::max<int64_t>(in.dim(), 1), name, ": dim ", dim, " out of range for shape ",
            in.shape());
  MDL_CHECK(out.shape() == in.shape() && out.dtype() == in.dtype(), name, ": output ", out.shape(), " ", out.dtype(),
            " does not match input ", in.shape(), " ", in.dtype());
}

}  // namespace

const SoftmaxRows& softmax_rows4() {
  using f32x4 = float __attribute__((vector_size(16)));
  static constexpr SoftmaxRows r = softmax_rows_impl::rows<f32x4>();
  return r;
}

const SoftmaxRows& softmax_rows() {
  if (toggles::wide_softmax()) {
    if (has_avx512f()) return softmax_rows16();
    if (has_avx2_fma()) return softmax_rows8();
  }
  return softmax_rows4();
}


void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  const char* name = op_name(log);
  check_args(name, out, in, dim);
  dispatch_floating(in.dtype(), name, [&]<class T>() {
    if (in.numel() == 0) return;
    const Tensor x = in.is_contiguous() ? in : in.contiguous();
    if (!out.is_contiguous()) {
      Tensor tmp = make_tensor(out.shape(), out.dtype(), out.device());
      softmax_impl<T>(tmp, x, in.dim() == 0 ? 0 : dim, log);
      kernels::copy(out.device(), out, tmp);
      return;
    }
    softmax_impl<T>(out, x, in.dim() == 0 ? 0 : dim, log);
  });
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  check_args(name, grad_in, out, dim);
  check_args(name, grad_out, out, dim);
  dispatch_floating(out.dtype(), name, [&]<class T>() {
    if (out.numel() == 0) return;
    const Tensor g = grad_out.is_contiguous() ? grad_out : grad_out.contiguous();
    const Tensor y = out.is_contiguous() ? out : out.contiguous();
    if (!grad_in.is_contiguous()) {
      Tensor tmp = make_tensor(grad_in.shape(), grad_in.dtype(), grad_in.device());
      softmax_backward_impl<T>(tmp, g, y, dim, log);
      kernels::copy(grad_in.device(), grad_in, tmp);
      return;
    }
    softmax_backward_impl<T>(grad_in, g, y, dim, log);
  });
}

}  // namespace mdl::cpu
