// CPU fused scaled-dot-product attention, forward and backward side by side. The products run on
// the GEMM micro-kernel with every operand packed once (gemm.h: PackedA, PackedB) and the scores
// held transposed: a tile of T queries (T = the micro-kernel's panel width) gets its scores as
// S^T (keys x T), whose row-major layout IS a packed B panel, so S^T feeds the next product (P v,
// computed as v^T P^T) with no packing, and the softmax runs down the keys with one vector lane
// per query: no horizontal sums. A causal tile stops at the last key its last query may see.
// The forward's task is one (batch, head) matrix, or every c-th tile of it when there are fewer
// matrices than threads; the backward's is one matrix, its tiles in order (deterministic), dk and
// dv accumulated transposed. f16/bf16 operands compute in f32 and their results are rounded once;
// bf16's products run on the bf16 pair-dot kernel where gemm.h's bf16 precision gets it (VDPBF16PS),
// which rounds their operands to bf16: the probabilities P before P v and dv = P^T dO, and dS before
// dq and dk, as PyTorch's CPU flash attention rounds P to the input dtype and GPU flash attention
// does (the softmax, its sums and the accumulations stay f32). bf16 q, k, v and dO go to the products
// as they are (Operand), with no widened copy. f64 runs the same walk on gemm_f64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/attention_lanes.h"
#include "cpu/float_block.h"
#include "cpu/gemm.h"
#include "cpu/scratch.h"
#include "cpu/transpose_blocks.h"
#include "kernels/attention.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

constexpr int64_t kMinTaskMacs = int64_t(1) << 18;  // per thread; below it, waking a thread costs more

// A matrix as the loops and GEMM read it: element (r, c) at p[r * rs + c * cs].
template <class T>
struct Mat {
  const T* p;
  int64_t rs, cs;
  const T& operator()(int64_t r, int64_t c) const { return p[r * rs + c * cs]; }
  Mat transposed() const { return {p, cs, rs}; }
};

// rows x cols of m as type A (the compute type, or bf16 kept as it is) with contiguous rows: m itself
// when T is A and its rows are contiguous, else a contiguous copy in buf, widened where A is wider.
template <class A, class T>
Mat<A> widen(const Mat<T>& m, int64_t rows, int64_t cols, std::vector<A>& buf) {
  if constexpr (std::is_same_v<A, T>)
    if (m.cs == 1) return m;
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

// The type the products take T's operands in (widen<Operand<T>>): bf16 as it is (the pair kernel
// pairs its bits, the f32 layouts widen them exactly), else the compute type.
template <class T>
using Operand = std::conditional_t<std::is_same_v<T, BFloat16>, BFloat16, acc_t<T>>;

// ---- the operands: f32 packed once for the micro-kernel, f64 (the reference dtype) read where it lies

// The precision of T's products: bf16 tensors' on bf16 pairs (gemm.h), f16's in f32 (f16 values are
// not bf16 values).
template <class T>
constexpr GemmPrecision kPrecision = std::is_same_v<T, BFloat16> ? GemmPrecision::bf16 : GemmPrecision::f32;

// A left operand (M x K) reused by every tile, multiplied by one panel: a row-major k x n buffer, n <= the
// tile width, rows `width` apart (for f32 the width is the panel width, so the buffer is a panel).
template <class A>
struct Left;
template <>
struct Left<float> {
  PackedA packed;
  // a: floats, or bf16 (packed as it is); the panel likewise
  template <class S>
  void set(const Mat<S>& a, int64_t M, int64_t K, GemmPrecision precision) {
    packed.pack(M, K, a.p, a.rs, a.cs, precision);
  }
  // C (m x n) = alpha * a[:m, :k] @ panel (k x n) + beta * C
  template <class S>
  void times_panel(int64_t m, int64_t n, int64_t k, float alpha, const S* panel, int64_t, float beta, float* c,
                   int64_t rsc) const {
    packed.times_panel(m, n, k, alpha, panel, beta, c, rsc, 1);
  }
};
template <>
struct Left<double> {
  Mat<double> a{nullptr, 0, 0};
  void set(const Mat<double>& m, int64_t, int64_t, GemmPrecision) { a = m; }
  void times_panel(int64_t m, int64_t n, int64_t k, double alpha, const double* panel, int64_t width, double beta,
                   double* c, int64_t rsc) const {
    gemm_f64(m, n, k, alpha, a.p, a.rs, a.cs, panel, width, 1, beta, c, rsc, 1);
  }
};

// A right operand (K x N) multiplied by one left matrix (M x k).
template <class A>
struct Right;
template <>
struct Right<float> {
  PackedB packed;
  void set(const Mat<float>& b, int64_t K, int64_t N, GemmPrecision precision) {
    packed.pack(K, N, b.p, b.rs, b.cs, precision);
  }
  // C (m x n) = alpha * a (m x k) @ b[:k, :n] + beta * C; a: floats, or bf16 (paired as it is)
  template <class S>
  void times(int64_t m, int64_t n, int64_t k, float alpha, const Mat<S>& a, float beta, float* c, int64_t rsc) const {
    packed.times(m, n, k, alpha, a.p, a.rs, a.cs, beta, c, rsc, 1);
  }
};
template <>
struct Right<double> {
  Mat<double> b{nullptr, 0, 0};
  void set(const Mat<double>& m, int64_t, int64_t, GemmPrecision) { b = m; }
  void times(int64_t m, int64_t n, int64_t k, double alpha, const Mat<double>& a, double beta, double* c,
             int64_t rsc) const {
    gemm_f64(m, n, k, alpha, a.p, a.rs, a.cs, b.p, b.rs, b.cs, beta, c, rsc, 1);
  }
};

// Queries per tile: the micro-kernel's panel width; for f64 any small number.
template <class A>
int64_t tile_width(GemmPrecision precision) {
  if constexpr (std::is_same_v<A, float>) return gemm_panel_width(precision);
  else return 8;
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
Mat<T> matrix(const Tensor& t, int64_t offset) {
  return {static_cast<const T*>(t.raw_data()) + offset, t.stride(-2), t.stride(-1)};
}

// dst (rows x cols, rows ldd apart) = the transpose of src (cols x rows, rows lds apart): f32 in
// register blocks where the CPU has AVX2 (transpose_blocks.h), else element by element.
template <class A>
void transpose(const A* src, int64_t lds, int64_t rows, int64_t cols, A* dst, int64_t ldd) {
  if constexpr (std::is_same_v<A, float> || std::is_same_v<A, BFloat16>) {
    const TransposeBlocks* tb = transpose_blocks();
    if (tb && (tb->sizes & sizeof(A)))  // bit 2^b for 2^b-byte elements: 4 (f32) and 2 (bf16)
      return tb->run(reinterpret_cast<char*>(dst), reinterpret_cast<const char*>(src), rows, cols, ldd, lds,
                     int(sizeof(A)), false);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * ldd + c] = src[r + c * lds];
}

// panel (cols x width) = the transpose of m (n x cols, contiguous rows); lanes [n, width) 0.
template <class A>
void transpose_into(const Mat<A>& m, int64_t n, int64_t cols, int64_t width, A* panel) {
  transpose(m.p, m.rs, cols, n, panel, width);
  if (n < width)
    for (int64_t e = 0; e < cols; ++e) std::fill(panel + e * width + n, panel + (e + 1) * width, A(0.0f));
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
  T* row(int64_t b, int64_t r) const { return p + off[size_t(b)] + r * rs; }
  // Rows [r0, r0 + n) of batch b, cols wide, from the transposed (cols x ...) src, rows lds apart:
  // element (r0 + i, c) = src[c * lds + i], rounded once.
  template <class A>
  void store_transposed(const A* src, int64_t lds, int64_t b, int64_t r0, int64_t n, int64_t cols,
                        std::vector<A>& buf) const {
    if constexpr (std::is_same_v<A, T>) {
      transpose(src, lds, n, cols, row(b, r0), rs);
    } else {
      buf.resize(size_t(n * cols));
      transpose(src, lds, n, cols, buf.data(), cols);
      for (int64_t i = 0; i < n; ++i) from_floats(buf.data() + i * cols, row(b, r0 + i), cols);
    }
  }
};

// The operands and geometry both directions share.
struct Problem {
  int64_t N, L, S, E, Ev;
  std::vector<int64_t> qo, ko, vo, mo;
  const bool* mask;  // null: no mask
  int64_t msl, mss;  // mask strides along L and S
  bool causal;

  Problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m, bool c)
      : L(q.size(-2)), S(k.size(-2)), E(q.size(-1)), Ev(v.size(-1)), qo(batch_offsets(q)), ko(batch_offsets(k)),
        vo(batch_offsets(v)), mask(m.defined() ? static_cast<const bool*>(m.raw_data()) : nullptr),
        msl(m.defined() ? m.stride(-2) : 0), mss(m.defined() ? m.stride(-1) : 0), causal(c) {
    N = int64_t(qo.size());
    if (m.defined()) mo = batch_offsets(m);
  }
  // Keys [0, keys(i0, n)) are the only ones queries i0 .. i0+n-1 may see.
  int64_t keys(int64_t i0, int64_t n) const { return causal ? std::min(S, i0 + n) : S; }

  // st (sk x width) holds the scores of queries i0 .. i0+n-1 in its lanes: those of keys hidden from
  // them become -inf.
  template <class A>
  void hide(A* st, int64_t width, int64_t b, int64_t i0, int64_t n, int64_t sk) const {
    const A ninf = -std::numeric_limits<A>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      if (causal)
        for (int64_t j = i0 + i + 1; j < sk; ++j) st[j * width + i] = ninf;
      if (mask) {
        const bool* mr = mask + mo[size_t(b)] + (i0 + i) * msl;
        for (int64_t j = 0; j < sk; ++j)
          if (!mr[j * mss]) st[j * width + i] = ninf;
      }
    }
  }
};

// ---- the softmax down the keys: one lane per query ------------------------------------------------------
// f32 runs cpu/attention_lanes.h's vector loops; f64, the reference dtype, these plain ones.

struct DoubleLanes {
  static void max(const double* st, int64_t rows, int64_t width, double* mx) {
    std::fill(mx, mx + width, -std::numeric_limits<double>::infinity());
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t i = 0; i < width; ++i) {
        const double x = st[j * width + i];
        mx[i] = ((x > mx[i]) | (x != x)) ? x : mx[i];
      }
  }
  static void exp(double* st, int64_t rows, int64_t width, const double* sub, double* sum) {
    if (sum) std::fill(sum, sum + width, 0.0);
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t i = 0; i < width; ++i) {
        double& x = st[j * width + i];
        x = std::exp(x - sub[i]);
        if (sum) sum[i] += x;
      }
  }
  static void scale(double* st, int64_t rows, int64_t width, const double* by) {
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t i = 0; i < width; ++i) st[j * width + i] *= by[i];
  }
  static void softmax_grad(const double* p, double* d, int64_t rows, int64_t width, double* D) {
    std::fill(D, D + width, 0.0);
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t i = 0; i < width; ++i) D[i] += p[j * width + i] * d[j * width + i];
    for (int64_t j = 0; j < rows; ++j)
      for (int64_t i = 0; i < width; ++i) d[j * width + i] = p[j * width + i] * (d[j * width + i] - D[i]);
  }
};

// The column loops for the compute type A and tile width W.
template <class A>
auto lanes_for(int64_t W) {
  if constexpr (std::is_same_v<A, float>) return attention_lanes(W);
  else return DoubleLanes{};
}

// ---- forward: out = softmax(mask(q k^T * scale)) v, lse per query ----------------------------------

template <class T>
void forward_impl(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& mask, bool causal, double scale) {
  using A = acc_t<T>;
  const Problem P(q, k, v, mask, causal);
  const int64_t L = P.L, S = P.S, E = P.E, Ev = P.Ev, W = tile_width<A>(kPrecision<T>);
  const Dest<T> o(out);
  A* lp = lse.data_ptr<A>();
  if (L == 0 || P.N == 0) return;
  // Tasks (matrix, c): query tiles c, c + split, c + 2 split, ... of the matrix. A matrix is split
  // only when there are fewer of them than twice the threads; interleaved tiles give each part
  // the same share of a causal matrix's work.
  const int64_t tiles = (L + W - 1) / W, threads = get_num_threads();
  const int64_t split = P.N >= 2 * threads ? 1 : std::min(tiles, (2 * threads + P.N - 1) / P.N);
  const int64_t cost = std::max<int64_t>(1, L / split * std::max<int64_t>(S, 1) * (E + Ev + 1));
  using O = Operand<T>;
  const auto lanes = lanes_for<A>(W);
  parallel_claims(0, P.N * split, std::max<int64_t>(1, kMinTaskMacs / cost), [&](Claims& claims) {
    Left<A> keys, values_t;
    Scratch<O> qt;
    Scratch<A> st, ot;
    std::vector<O> kbuf, vbuf, qbuf;
    std::vector<A> row, mx(static_cast<size_t>(W)), sub(static_cast<size_t>(W)), sum(static_cast<size_t>(W)),
        inv(static_cast<size_t>(W));
    for (int64_t t; claims.next(t);) {
      const int64_t b = t / split, c = t % split;
      const int64_t last = (tiles - 1 - (tiles - 1 - c) % split) * W, sk_all = P.keys(last, std::min(W, L - last));
      const Mat<O> km = widen<O>(matrix<T>(k, P.ko[size_t(b)]), sk_all, E, kbuf);   // (sk_all, E)
      const Mat<O> vm = widen<O>(matrix<T>(v, P.vo[size_t(b)]), sk_all, Ev, vbuf);  // (sk_all, Ev)
      keys.set(km, sk_all, E, kPrecision<T>);
      values_t.set(vm.transposed(), Ev, sk_all, kPrecision<T>);
      const Mat<T> qm = matrix<T>(q, P.qo[size_t(b)]);
      for (int64_t i0 = c * W; i0 < L; i0 += split * W) {
        const int64_t n = std::min(W, L - i0), sk = P.keys(i0, n);
        qt.resize(E * W), st.resize(std::max<int64_t>(sk, 1) * W), ot.resize(Ev * W);
        // st (sk, W) = k (sk, E) @ q^T (E, W) * scale, masked; exp(st - colmax) in place
        transpose_into(widen<O>(Mat<T>{&qm(i0, 0), qm.rs, qm.cs}, n, E, qbuf), n, E, W, qt.data());
        keys.times_panel(sk, W, E, A(scale), qt.data(), W, A(0), st.data(), W);
        P.hide(st.data(), W, b, i0, n, sk);
        lanes.max(st.data(), sk, W, mx.data());
        for (int64_t i = 0; i < W; ++i)  // a query that sees no key: exp(-inf - 0) = 0 everywhere
          sub[size_t(i)] = mx[size_t(i)] == -std::numeric_limits<A>::infinity() ? A(0) : mx[size_t(i)];
        lanes.exp(st.data(), sk, W, sub.data(), sum.data());
        for (int64_t i = 0; i < W; ++i) {
          const A s = sum[size_t(i)];
          inv[size_t(i)] = s == A(0) ? A(0) : A(1) / s;
          if (i < n) lp[b * L + i0 + i] = s == A(0) ? std::numeric_limits<A>::infinity() : mx[size_t(i)] + std::log(s);
        }
        // P^T: each query's column over its sum before the product, so that v near the dtype's
        // largest value cannot overflow in the sum
        lanes.scale(st.data(), sk, W, inv.data());
        // out^T (Ev, W) = v^T (Ev, sk) @ P^T (sk, W)
        values_t.times_panel(Ev, W, sk, A(1), st.data(), W, A(0), ot.data(), W);
        o.store_transposed(ot.data(), W, b, i0, n, Ev, row);
      }
    }
  });
}

// ---- backward: dv = P^T dO, dS = P * (dP - rowsum(P * dP)) with dP = dO v^T, dq = dS k * scale, dk = dS^T q * scale
// All transposed, a tile of queries at a time: P^T = exp(k q^T * scale - lse), dP^T = v dO^T,
// dS^T = P^T * (dP^T - D), dq^T = k^T dS^T * scale, dv^T += dO^T P, dk^T += q^T dS * scale.

template <class T>
void backward_impl(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& go, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& lse, const Tensor& mask, bool causal, double scale) {
  using A = acc_t<T>;
  const Problem P(q, k, v, mask, causal);
  const int64_t L = P.L, S = P.S, E = P.E, Ev = P.Ev, W = tile_width<A>(kPrecision<T>);
  const std::vector<int64_t> go_off = batch_offsets(go);
  const A* lp = lse.data_ptr<A>();
  const Dest<T> dqd(dq), dkd(dk), dvd(dv);
  const bool want_ds = dqd.p || dkd.p;
  const int64_t cost = std::max<int64_t>(1, L * std::max<int64_t>(S, 1) * (2 * E + 2 * Ev + 1));
  using O = Operand<T>;
  const auto lanes = lanes_for<A>(W);
  parallel_claims(0, P.N, std::max<int64_t>(1, kMinTaskMacs / cost), [&](Claims& claims) {
    Left<A> keys, values, keys_t;
    Right<A> probs, dscores;
    Scratch<O> qt, gt;
    Scratch<A> st, dst, dqt, dkt, dvt;
    std::vector<O> kbuf, vbuf, qbuf, gbuf;
    std::vector<A> row, sub(static_cast<size_t>(W)), D(static_cast<size_t>(W));
    for (int64_t b; claims.next(b);) {
      const int64_t sk_all = P.keys(0, L);
      const Mat<O> km = widen<O>(matrix<T>(k, P.ko[size_t(b)]), sk_all, E, kbuf);   // (sk_all, E)
      const Mat<O> vm = widen<O>(matrix<T>(v, P.vo[size_t(b)]), sk_all, Ev, vbuf);  // (sk_all, Ev)
      const Mat<T> qm = matrix<T>(q, P.qo[size_t(b)]), gm = matrix<T>(go, go_off[size_t(b)]);
      keys.set(km, sk_all, E, kPrecision<T>);
      if (want_ds) values.set(vm, sk_all, Ev, kPrecision<T>);
      if (dqd.p) keys_t.set(km.transposed(), E, sk_all, kPrecision<T>);
      // dk^T (E, S) and dv^T (Ev, S) gather every tile's share
      if (dkd.p) dkt.resize(E * S), std::fill(dkt.begin(), dkt.end(), A(0));
      if (dvd.p) dvt.resize(Ev * S), std::fill(dvt.begin(), dvt.end(), A(0));
      for (int64_t i0 = 0; i0 < L; i0 += W) {
        const int64_t n = std::min(W, L - i0), sk = P.keys(i0, n);
        qt.resize(E * W), gt.resize(Ev * W), st.resize(std::max<int64_t>(sk, 1) * W);
        // P^T (sk, W) = exp(k (sk, E) @ q^T (E, W) * scale - lse), hidden keys and absent queries 0
        const Mat<O> qr = widen<O>(Mat<T>{&qm(i0, 0), qm.rs, qm.cs}, n, E, qbuf);   // (n, E)
        const Mat<O> gr = widen<O>(Mat<T>{&gm(i0, 0), gm.rs, gm.cs}, n, Ev, gbuf);  // (n, Ev)
        transpose_into(qr, n, E, W, qt.data());
        transpose_into(gr, n, Ev, W, gt.data());
        keys.times_panel(sk, W, E, A(scale), qt.data(), W, A(0), st.data(), W);
        P.hide(st.data(), W, b, i0, n, sk);
        for (int64_t i = 0; i < W; ++i)
          sub[size_t(i)] = i < n ? lp[b * L + i0 + i] : std::numeric_limits<A>::infinity();
        lanes.exp(st.data(), sk, W, sub.data(), nullptr);
        // dv^T (Ev, sk) += dO^T (Ev, n) @ P (n, sk)
        if (dvd.p) {
          probs.set(Mat<A>{st.data(), 1, W}, n, sk, kPrecision<T>);
          probs.times(Ev, sk, n, A(1), gr.transposed(), A(1), dvt.data(), S);
        }
        if (!want_ds) continue;
        // dS^T (sk, W) = P^T * (dP^T - D), dP^T = v (sk, Ev) @ dO^T (Ev, W), D = sum over the keys of
        // P * dP per query (the softmax's own backward: exactly 0 where P is one-hot, which
        // FlashAttention's rowsum(dO * O) is only up to O's rounding)
        dst.resize(std::max<int64_t>(sk, 1) * W);
        values.times_panel(sk, W, Ev, A(1), gt.data(), W, A(0), dst.data(), W);
        lanes.softmax_grad(st.data(), dst.data(), sk, W, D.data());
        // dq^T (E, W) = k^T (E, sk) @ dS^T (sk, W) * scale
        if (dqd.p) {
          dqt.resize(E * W);
          keys_t.times_panel(E, W, sk, A(scale), dst.data(), W, A(0), dqt.data(), W);
          dqd.store_transposed(dqt.data(), W, b, i0, n, E, row);
        }
        // dk^T (E, sk) += q^T (E, n) @ dS (n, sk) * scale
        if (dkd.p) {
          dscores.set(Mat<A>{dst.data(), 1, W}, n, sk, kPrecision<T>);
          dscores.times(E, sk, n, A(scale), qr.transposed(), A(1), dkt.data(), S);
        }
      }
      if (dkd.p) dkd.store_transposed(dkt.data(), S, b, 0, S, E, row);
      if (dvd.p) dvd.store_transposed(dvt.data(), S, b, 0, S, Ev, row);
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
                        const Tensor& k, const Tensor& v, const Tensor& /*out: D comes from P and dP*/,
                        const Tensor& lse, const Tensor& mask, bool causal, double scale) {
  dispatch_floating(q.dtype(), "scaled_dot_product_attention_backward",
                    [&]<class T>() { backward_impl<T>(dq, dk, dv, grad_out, q, k, v, lse, mask, causal, scale); });
}

}  // namespace mdl::cpu
