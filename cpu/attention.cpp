// CPU fused scaled-dot-product attention, forward and backward side by side. The forward runs
// one task per (batch, block of query rows): scores against the keys the block may see (a causal
// block stops at its last row) on our GEMM, the masked stable softmax in place, then P v. The
// backward recomputes each block's P from the saved logsumexp. f16/bf16 operands are widened to
// f32 per task and the f32 results rounded once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/cpu_features.h"
#include "cpu/float_block.h"
#include "cpu/gemm.h"
#include "cpu/vec_math.h"
#include "kernels/attention.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

constexpr int64_t kBlock = 64;                      // query rows per task
constexpr int64_t kMinTaskMacs = int64_t(1) << 18;  // per thread; below it, waking a thread costs more

template <class A>
void gemm(int64_t M, int64_t N, int64_t K, A alpha, const A* a, int64_t rsa, int64_t csa, const A* b, int64_t rsb,
          int64_t csb, A beta, A* c, int64_t rsc, int64_t csc) {
  if constexpr (std::is_same_v<A, float>) gemm_f32(M, N, K, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
  else gemm_f64(M, N, K, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

// A matrix as the loops and GEMM read it: element (r, c) at p[r * rs + c * cs].
template <class T>
struct Mat {
  const T* p;
  int64_t rs, cs;
  const T& operator()(int64_t r, int64_t c) const { return p[r * rs + c * cs]; }
};

// rows x cols of m in the compute type A: m itself when T is A, else a widened contiguous copy in buf.
template <class A, class T>
Mat<A> widen(const Mat<T>& m, int64_t rows, int64_t cols, std::vector<A>& buf) {
  if constexpr (std::is_same_v<A, T>) {
    return m;
  } else {
    buf.resize(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      A* row = buf.data() + r * cols;
      if constexpr (std::is_same_v<A, float>) {
        for (int64_t c = 0; c < cols; c += kFloatBlock)
          load_floats<T>(reinterpret_cast<const char*>(&m(r, c)), m.cs * int64_t(sizeof(T)), row + c,
                         std::min(kFloatBlock, cols - c));
      } else {
        for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<A>(m(r, c));
      }
    }
    return {buf.data(), cols, 1};
  }
}

// Element offset (from raw_data) of each matrix of t, t's batch dims (all but the last two) in row-major order.
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t nb = t.dim() - 2;
  int64_t n = 1;
  for (int64_t d = 0; d < nb; ++d) n *= t.size(d);
  std::vector<int64_t> off(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      o += rem % t.size(d) * t.stride(d);
      rem /= t.size(d);
    }
    off[size_t(i)] = o;
  }
  return off;
}

template <class T>
Mat<T> matrix(const Tensor& t, int64_t offset, int64_t row0) {
  const T* p = static_cast<const T*>(t.raw_data()) + offset;
  return {p + row0 * t.stride(-2), t.stride(-2), t.stride(-1)};
}

// An output the kernels write (out, dq, dk, dv): any batch and row strides, unit column stride.
template <class T>
struct Dest {
  T* p = nullptr;  // null: not wanted
  int64_t rs = 0;
  std::vector<int64_t> off;  // per flat batch index
  explicit Dest(const Tensor& t) {
    if (!t.defined()) return;
    MDL_CHECK(t.dim() < 2 || t.size(-1) <= 1 || t.stride(-1) == 1,
              "scaled_dot_product_attention: an output must have unit stride along its last dim, got strides ",
              shape_str(t.strides()));
    p = t.data_ptr<T>(), rs = t.dim() >= 2 ? t.stride(-2) : 0, off = batch_offsets(t);
  }
  T* rows(int64_t b, int64_t r0) const { return p + off[size_t(b)] + r0 * rs; }
  // Rows [r0, r0 + m) of batch b from the contiguous (m, cols) floats at src, each rounded once.
  template <class A>
  void store(const A* src, int64_t b, int64_t r0, int64_t m, int64_t cols) const {
    for (int64_t r = 0; r < m; ++r) from_floats(src + r * cols, rows(b, r0 + r), cols);
  }
};

// The operands and geometry both directions share.
struct Problem {
  int64_t N, L, S, E, Ev, blocks;
  std::vector<int64_t> qo, ko, vo, mo;
  const bool* mask;  // null: no mask
  int64_t msl, mss;  // mask strides along L and S
  bool causal;

  Problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m, bool c)
      : L(q.size(-2)), S(k.size(-2)), E(q.size(-1)), Ev(v.size(-1)), qo(batch_offsets(q)), ko(batch_offsets(k)),
        vo(batch_offsets(v)), mask(m.defined() ? static_cast<const bool*>(m.raw_data()) : nullptr),
        msl(m.defined() ? m.stride(-2) : 0), mss(m.defined() ? m.stride(-1) : 0), causal(c) {
    N = int64_t(qo.size());
    blocks = (L + kBlock - 1) / kBlock;
    if (m.defined()) mo = batch_offsets(m);
  }
  // Keys [0, keys(i0, m)) are the only ones rows i0 .. i0+m-1 may see.
  int64_t keys(int64_t i0, int64_t m) const { return causal ? std::min(S, i0 + m) : S; }

  // Sets the scores of keys hidden from query row i of batch b to -inf; row holds sk keys.
  template <class A>
  void hide(A* row, int64_t b, int64_t i, int64_t sk) const {
    const A ninf = -std::numeric_limits<A>::infinity();
    if (causal)
      for (int64_t j = i + 1; j < sk; ++j) row[j] = ninf;
    if (mask) {
      const bool* mr = mask + mo[size_t(b)] + i * msl;
      for (int64_t j = 0; j < sk; ++j) row[j] = mr[j * mss] ? row[j] : ninf;
    }
  }
};

template <class A>
inline A nan_max(A a, A x) {
  return (x > a) | (x != x) ? x : a;
}

// ---- row math: the softmax in place (returning the logsumexp) and exp(x - lse) ---------------------
// A row with nothing visible (all -inf) becomes zeros with lse = +inf, so exp(x - lse) is 0 there too.
// f64 runs plain loops with std::exp; f32 runs on GCC vectors of 8 (AVX2, chosen at run time) or 4
// (SSE2) floats, since the auto-vectoriser will not if-convert the selects in exp and max.

double softmax_row(double* row, int64_t n) {
  const double ninf = -std::numeric_limits<double>::infinity();
  double mx = ninf;
  for (int64_t j = 0; j < n; ++j) mx = nan_max(mx, row[j]);
  if (mx == ninf) {
    std::fill(row, row + n, 0.0);
    return std::numeric_limits<double>::infinity();
  }
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += row[j] = std::exp(row[j] - mx);
  for (int64_t j = 0; j < n; ++j) row[j] /= s;
  return mx + std::log(s);
}

void exp_row(double* row, int64_t n, double lse) {
  for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] - lse);
}

using f4 = float __attribute__((vector_size(16)));
using f8 = float __attribute__((vector_size(32)));
template <int W>
struct Vec;
template <>
struct Vec<4> {
  using F = f4;
};
template <>
struct Vec<8> {
  using F = f8;
};
// Vectors travel by reference: passing 32-byte vectors by value outside AVX code changes the ABI.

// row[j] = e^(row[j] - sub) in place; returns the sum.
template <int W>
[[gnu::always_inline]] inline float exp_sub(float* row, int64_t n, float sub) {
  using F = typename Vec<W>::F;
  F s = {}, x;
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    std::memcpy(&x, row + j, sizeof x);
    x -= sub;
    x = vecmath::exp_v(x);  // vec_math.h, ~1 ulp
    std::memcpy(row + j, &x, sizeof x);
    s += x;
  }
  if (j < n) {  // the last n % W, padded with -inf (which gives 0)
    float pad[W];
    for (int l = 0; l < W; ++l) pad[l] = j + l < n ? row[j + l] : -std::numeric_limits<float>::infinity();
    std::memcpy(&x, pad, sizeof x);
    x -= sub;
    x = vecmath::exp_v(x);  // vec_math.h, ~1 ulp
    s += x;
    std::memcpy(pad, &x, sizeof x);
    for (int l = 0; j + l < n; ++l) row[j + l] = pad[l];
  }
  float total = 0;
  for (int l = 0; l < W; ++l) total += s[l];
  return total;
}

template <int W>
[[gnu::always_inline]] inline float softmax_row_v(float* row, int64_t n) {
  using F = typename Vec<W>::F;
  const float ninf = -std::numeric_limits<float>::infinity();
  F m = F{} + ninf, x;
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    std::memcpy(&x, row + j, sizeof x);
    m = (x > m) | (x != x) ? x : m;
  }
  float mx = ninf;
  for (int l = 0; l < W; ++l) mx = nan_max(mx, m[l]);
  for (; j < n; ++j) mx = nan_max(mx, row[j]);
  if (mx == ninf) {
    std::fill(row, row + n, 0.0f);
    return std::numeric_limits<float>::infinity();
  }
  const float s = exp_sub<W>(row, n, mx), inv = 1.0f / s;
  for (j = 0; j < n; ++j) row[j] *= inv;
  return mx + std::log(s);
}

[[gnu::target("avx2,fma")]] float softmax_row_avx2(float* row, int64_t n) { return softmax_row_v<8>(row, n); }
[[gnu::target("avx2,fma")]] void exp_row_avx2(float* row, int64_t n, float lse) { exp_sub<8>(row, n, lse); }

float softmax_row(float* row, int64_t n) {
  return has_avx2_fma() ? softmax_row_avx2(row, n) : softmax_row_v<4>(row, n);
}
void exp_row(float* row, int64_t n, float lse) {
  if (has_avx2_fma()) exp_row_avx2(row, n, lse);
  else exp_sub<4>(row, n, lse);
}

// ---- forward: out = softmax(mask(q k^T * scale)) v, lse per row ------------------------------------

template <class T>
void forward_impl(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& mask, bool causal, double scale) {
  using A = acc_t<T>;
  const Problem P(q, k, v, mask, causal);
  const int64_t L = P.L, E = P.E, Ev = P.Ev;
  const Dest<T> o(out);
  A* lp = lse.data_ptr<A>();
  const int64_t cost = std::max<int64_t>(1, std::min(L, kBlock) * std::max<int64_t>(P.S, 1) * (E + Ev + 1));
  parallel_for(0, P.N * P.blocks, std::max<int64_t>(1, kMinTaskMacs / cost), [&](int64_t t0, int64_t t1) {
    std::vector<A> s, qbuf, kbuf, vbuf, obuf;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / P.blocks, i0 = t % P.blocks * kBlock, m = std::min(kBlock, L - i0), sk = P.keys(i0, m);
      const Mat<A> qm = widen<A>(matrix<T>(q, P.qo[size_t(b)], i0), m, E, qbuf);   // (m, E)
      const Mat<A> km = widen<A>(matrix<T>(k, P.ko[size_t(b)], 0), sk, E, kbuf);   // (sk, E)
      const Mat<A> vm = widen<A>(matrix<T>(v, P.vo[size_t(b)], 0), sk, Ev, vbuf);  // (sk, Ev)
      s.resize(size_t(m * sk));
      // s (m, sk) = q (m, E) @ k^T (E, sk) * scale
      gemm<A>(m, sk, E, A(scale), qm.p, qm.rs, qm.cs, km.p, km.cs, km.rs, A(0), s.data(), sk, 1);
      for (int64_t r = 0; r < m; ++r) {
        P.hide(s.data() + r * sk, b, i0 + r, sk);
        lp[b * L + i0 + r] = softmax_row(s.data() + r * sk, sk);
      }
      // out (m, Ev) = P (m, sk) @ v (sk, Ev)
      T* dst = o.rows(b, i0);
      if constexpr (std::is_same_v<A, T>) {
        gemm<A>(m, Ev, sk, A(1), s.data(), sk, 1, vm.p, vm.rs, vm.cs, A(0), dst, o.rs, 1);
      } else {
        obuf.resize(size_t(m * Ev));
        gemm<A>(m, Ev, sk, A(1), s.data(), sk, 1, vm.p, vm.rs, vm.cs, A(0), obuf.data(), Ev, 1);
        o.store(obuf.data(), b, i0, m, Ev);
      }
    }
  });
}

// ---- backward: dv = P^T dO, dS = P * (dO v^T - rowsum(dO * O)), dq = dS k * scale, dk = dS^T q * scale
// One task per batch (its dk, dv gather every query block), blocks in order: deterministic.

template <class T>
void backward_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& go, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
                   bool causal, double scale) {
  using A = acc_t<T>;
  constexpr bool kSame = std::is_same_v<A, T>;
  const Problem P(q, k, v, mask, causal);
  const int64_t L = P.L, S = P.S, E = P.E, Ev = P.Ev;
  const std::vector<int64_t> go_off = batch_offsets(go), out_off = batch_offsets(out);
  const A* lp = lse.data_ptr<A>();
  const Dest<T> dqd(dq), dkd(dk), dvd(dv);
  const bool want_ds = dqd.p || dkd.p;
  const int64_t cost = std::max<int64_t>(1, L * std::max<int64_t>(S, 1) * (2 * E + 2 * Ev + 1));
  parallel_for(0, P.N, std::max<int64_t>(1, kMinTaskMacs / cost), [&](int64_t b0, int64_t b1) {
    std::vector<A> p, ds, qbuf, kbuf, vbuf, gbuf, obuf, dqbuf, dkacc, dvacc;
    for (int64_t b = b0; b < b1; ++b) {
      const Mat<A> km = widen<A>(matrix<T>(k, P.ko[size_t(b)], 0), S, E, kbuf);   // (S, E)
      const Mat<A> vm = widen<A>(matrix<T>(v, P.vo[size_t(b)], 0), S, Ev, vbuf);  // (S, Ev)
      // dk (S, E) and dv (S, Ev) accumulate over the query blocks: in place (row stride ldk, ldv), or
      // in contiguous A buffers then rounded.
      A* dka = nullptr;
      A* dva = nullptr;
      int64_t ldk = E, ldv = Ev;
      if (dkd.p) {
        if constexpr (kSame) dka = dkd.rows(b, 0), ldk = dkd.rs;
        else dkacc.resize(size_t(S * E)), dka = dkacc.data();
        for (int64_t j = 0; j < S; ++j) std::fill(dka + j * ldk, dka + j * ldk + E, A(0));
      }
      if (dvd.p) {
        if constexpr (kSame) dva = dvd.rows(b, 0), ldv = dvd.rs;
        else dvacc.resize(size_t(S * Ev)), dva = dvacc.data();
        for (int64_t j = 0; j < S; ++j) std::fill(dva + j * ldv, dva + j * ldv + Ev, A(0));
      }
      for (int64_t i0 = 0; i0 < L; i0 += kBlock) {
        const int64_t m = std::min(kBlock, L - i0), sk = P.keys(i0, m);
        const Mat<A> qm = widen<A>(matrix<T>(q, P.qo[size_t(b)], i0), m, E, qbuf);      // (m, E)
        const Mat<A> gm = widen<A>(matrix<T>(go, go_off[size_t(b)], i0), m, Ev, gbuf);  // (m, Ev)
        // p (m, sk) = exp(q k^T * scale - lse), hidden keys 0
        p.resize(size_t(m * sk));
        gemm<A>(m, sk, E, A(scale), qm.p, qm.rs, qm.cs, km.p, km.cs, km.rs, A(0), p.data(), sk, 1);
        for (int64_t r = 0; r < m; ++r) {
          A* row = p.data() + r * sk;
          P.hide(row, b, i0 + r, sk);
          exp_row(row, sk, lp[b * L + i0 + r]);
        }
        // dv (sk, Ev) += P^T (sk, m) @ dO (m, Ev)
        if (dva) gemm<A>(sk, Ev, m, A(1), p.data(), 1, sk, gm.p, gm.rs, gm.cs, A(1), dva, ldv, 1);
        if (!want_ds) continue;
        const Mat<A> om = widen<A>(matrix<T>(out, out_off[size_t(b)], i0), m, Ev, obuf);  // (m, Ev)
        // ds (m, sk) = dO (m, Ev) @ v^T (Ev, sk), then P * (ds - rowsum(dO * O))
        ds.resize(size_t(m * sk));
        gemm<A>(m, sk, Ev, A(1), gm.p, gm.rs, gm.cs, vm.p, vm.cs, vm.rs, A(0), ds.data(), sk, 1);
        for (int64_t r = 0; r < m; ++r) {
          A d = 0;
          for (int64_t e = 0; e < Ev; ++e) d += gm(r, e) * om(r, e);
          A* dr = ds.data() + r * sk;
          const A* pr = p.data() + r * sk;
          for (int64_t j = 0; j < sk; ++j) dr[j] = pr[j] * (dr[j] - d);
        }
        // dq (m, E) = ds (m, sk) @ k (sk, E) * scale
        if (dqd.p) {
          if constexpr (kSame) {
            gemm<A>(m, E, sk, A(scale), ds.data(), sk, 1, km.p, km.rs, km.cs, A(0), dqd.rows(b, i0), dqd.rs, 1);
          } else {
            dqbuf.resize(size_t(m * E));
            gemm<A>(m, E, sk, A(scale), ds.data(), sk, 1, km.p, km.rs, km.cs, A(0), dqbuf.data(), E, 1);
            dqd.store(dqbuf.data(), b, i0, m, E);
          }
        }
        // dk (sk, E) += ds^T (sk, m) @ q (m, E) * scale
        if (dka) gemm<A>(sk, E, m, A(scale), ds.data(), 1, sk, qm.p, qm.rs, qm.cs, A(1), dka, ldk, 1);
      }
      if constexpr (!kSame) {
        if (dkd.p) dkd.store(dkacc.data(), b, 0, S, E);
        if (dvd.p) dvd.store(dvacc.data(), b, 0, S, Ev);
      }
    }
  });
}

}  // namespace

void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& mask, bool causal, double scale) {
  dispatch_floating(q.dtype(), "scaled_dot_product_attention",
                    [&]<class T>() { forward_impl<T>(out, lse, q, k, v, mask, causal, scale); });
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& grad_out, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const Tensor& mask,
                        bool causal, double scale) {
  dispatch_floating(q.dtype(), "scaled_dot_product_attention_backward",
                    [&]<class T>() { backward_impl<T>(dq, dk, dv, grad_out, q, k, v, out, lse, mask, causal, scale); });
}

}  // namespace mdl::cpu
