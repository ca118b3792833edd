// CPU kernels for the fused normalisations (batch norm; group norm, with layer norm as its
// one-group case) and dropout. Inputs arrive contiguous as (N, C, S). Statistics are two-pass
// (mean, then squared deviations) and every sum runs in double in a fixed order per channel or
// per row (f16/bf16 batch norm: float sums of blocks, added in double), so results do not depend
// on the thread count. bf16 batch norm's rows run on the CPU's widest vectors
// (cpu/bf16_batch_norm_rows.h), f16's and the switch-off path through float blocks; with S == 1
// (channels-last, BatchNorm1d) every pass walks the rows of C channels instead.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cpu/bf16_batch_norm_rows.h"
#include "cpu/bf16_batch_norm_rows_impl.h"
#include "cpu/float_block.h"
#include "cpu/cpu_features.h"
#include "cpu/kernels.h"
#include "cpu/layer_norm_rows.h"
#include "cpu/layer_norm_rows_impl.h"
#include "cpu/row_blocks.h"
#include "cpu/scratch.h"
#include "cpu/loops.h"
#include "cpu/select_bits.h"
#include "kernels/convert.h"
#include "kernels/norm.h"
#include "kernels/norm_math.h"
#include "kernels/dropout.h"
#include "tensor/parallel.h"
#include "kernels/philox.h"
#include "switches/list/toggles.h"

namespace mdl::cpu {

namespace {

constexpr int kLanes = 4;  // independent accumulators per sum: ILP without reassociation flags

template <int K>
using Sums = std::array<double, K>;

template <int K>
Sums<K> fold(const double (&l)[kLanes][K]) {
  Sums<K> r;
  for (int k = 0; k < K; ++k) r[k] = (l[0][k] + l[1][k]) + (l[2][k] + l[3][k]);
  return r;
}

// Sums of f(i, c) over one row of K channels x S elements starting at element i0, channel c0.
template <int K, class F>
Sums<K> row_sum(int64_t i0, int64_t c0, int64_t nch, int64_t S, const F& f) {
  double l[kLanes][K] = {};
  auto add = [&](int lane, const Sums<K>& v) {
    for (int k = 0; k < K; ++k) l[lane][k] += v[k];
  };
  if (S == 1) {  // one element per channel: lanes run along the channels
    int64_t j = 0;
    for (; j + kLanes <= nch; j += kLanes)
      for (int q = 0; q < kLanes; ++q) add(q, f(i0 + j + q, c0 + j + q));
    for (; j < nch; ++j) add(0, f(i0 + j, c0 + j));
    return fold(l);
  }
  for (int64_t c = 0; c < nch; ++c) {
    const int64_t b = i0 + c * S;
    int64_t s = 0;
    for (; s + kLanes <= S; s += kLanes)
      for (int q = 0; q < kLanes; ++q) add(q, f(b + s + q, c0 + c));
    for (; s < S; ++s) add(0, f(b + s, c0 + c));
  }
  return fold(l);
}

// out[k][c] = sum over (n, s) of f(i, n, c)[k] for (N, C, S). Threads split the channels; each
// channel adds its (n, s) elements in order, so the sums are the serial ones.
template <int K, class F>
void channel_sums(int64_t N, int64_t C, int64_t S, std::array<double*, K> out, const F& f) {
  parallel_for(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, N * S)), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      for (int k = 0; k < K; ++k) out[k][c] = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = n * C;
      for (int64_t c = cb; c < ce; ++c) {
        auto at = [&](int64_t i, int64_t ch) { return f(i, n, ch); };
        const Sums<K> v = S == 1 ? f(row + c, n, c) : row_sum<K>((row + c) * S, c, 1, S, at);
        for (int k = 0; k < K; ++k) out[k][c] += v[k];
      }
    }
  });
}

// Calls f(i, rows, len, c) over the elements of (N, C, S) in memory order, threads splitting the
// elements: `rows` whole rows of one sample from element i (len = S), or, where a thread's piece cuts
// a row, that row's part (rows = 1, len < S).
template <class F>
void for_each_span(int64_t N, int64_t C, int64_t S, const F& f) {
  parallel_for_balanced(0, N * C * S, kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {
      const int64_t row = i / S, c = row % C, start = row * S;
      if (i != start || e - i < S) {
        const int64_t end = std::min(e, start + S);
        f(i, 1, end - i, c);
        i = end;
      } else {
        const int64_t rows = std::min(C - c, (e - i) / S);
        f(i, rows, S, c);
        i += rows * S;
      }
    }
  });
}

// Calls f(i, end, c) for each run [i, end) of elements of (N, C, S) within one (n, c): for_each_span's
// runs of rows one row at a time.
template <class F>
void for_each_run(int64_t N, int64_t C, int64_t S, const F& f) {
  for_each_span(N, C, S, [&](int64_t i, int64_t rows, int64_t len, int64_t c) {
    for (int64_t r = 0; r < rows; ++r, i += len) f(i, i + len, c + r);
  });
}

// out[i] = T(f(a[i], b[i])) in float for i in [i0, end), 16-bit T (b may be null: f's second
// argument is then 0): through float blocks, each operand widened and the result rounded by one
// bulk conversion a block, the bits of the element-by-element loop.
template <class T, class F>
void map_floats(const T* a, const T* b, T* out, int64_t i0, int64_t end, const F& f) {
  float fa[kFloatBlock], fb[kFloatBlock] = {};
  for (int64_t i = i0; i < end; i += kFloatBlock) {
    const int64_t m = std::min(kFloatBlock, end - i);
    load_floats<T>(reinterpret_cast<const char*>(a + i), sizeof(T), fa, m);
    if (b) load_floats<T>(reinterpret_cast<const char*>(b + i), sizeof(T), fb, m);
    for (int64_t k = 0; k < m; ++k) fa[k] = f(fa[k], fb[k]);
    store_floats<T>(reinterpret_cast<char*>(out + i), sizeof(T), fa, m);
  }
}

// A per-channel parameter as an array of A, or `fallback` everywhere when undefined.
template <class A>
std::vector<A> param(const Tensor& p, int64_t C, A fallback) {
  std::vector<A> v(static_cast<size_t>(C), fallback);
  if (p.defined()) {
    const A* d = p.data_ptr<A>();
    for (int64_t c = 0; c < C; ++c) v[size_t(c)] = d[c];
  }
  return v;
}

namespace norm_math = kernels::norm_math;
using norm_math::activate;
using norm_math::Affine;
using norm_math::plus_residual;
using norm_math::pre_activation;
using norm_math::with_flag;
using norm_math::with_relu;

// norm_math::relu_gate<RELU>(g, pre_activation(x, k)) with no branch (cpu/select_bits.h): on a random mask
// a branch mispredicts about half the time, which made the backward several times slower.
template <bool RELU, class A>
A gated(A g, A x, const Affine<A>& k) {
  if constexpr (RELU) return select_bits(!(pre_activation(x, k) <= A(0)), g, A(0));
  else return g;
}

// f32 batch norm's backward sums, sdy[c] = sum gy and sdx[c] = sum gy * (x - mean[c]) (gy gated by
// the ReLU's mask when RELU), added as channel_sums<2> adds them (per channel, row by row, in four
// double lanes with element s in lane s % 4, a row's tail in lane 0, the lanes folded (l0 + l1) +
// (l2 + l3)) but four elements a vector instead of one: the same bits. The scalar lanes ran the
// ReLU's variant at a third of memory speed.
template <bool RELU>
void f32_backward_sums(int64_t N, int64_t C, int64_t S, const float* x, const float* gy, const float* mean,
                       const Affine<float>* fwd, double* sdy, double* sdx) {
  using f4 = float __attribute__((vector_size(16)));
  using d4 = double __attribute__((vector_size(32)));
  parallel_for(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, N * S)), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) sdy[c] = sdx[c] = 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = cb; c < ce; ++c) {
        const float *xr = x + (n * C + c) * S, *gr = gy + (n * C + c) * S;
        const double m = double(mean[c]);
        const Affine<float> k = RELU ? fwd[c] : Affine<float>{};
        d4 ly = {}, lx = {};
        int64_t s = 0;
        for (; s + 4 <= S; s += 4) {
          f4 xv, gv;
          std::memcpy(&xv, xr + s, sizeof xv);
          std::memcpy(&gv, gr + s, sizeof gv);
          if constexpr (RELU) gv = (xv - k.mean) * k.a + k.b <= 0.0f ? f4{} : gv;
          const d4 g = __builtin_convertvector(gv, d4);
          ly += g;
          lx += g * (__builtin_convertvector(xv, d4) - m);
        }
        for (; s < S; ++s) {
          const double g = double(gated<RELU>(gr[s], xr[s], k));
          ly[0] += g;
          lx[0] += g * (double(xr[s]) - m);
        }
        sdy[c] += (ly[0] + ly[1]) + (ly[2] + ly[3]);
        sdx[c] += (lx[0] + lx[1]) + (lx[2] + lx[3]);
      }
  });
}

// bf16 batch norm's row loops (cpu/bf16_batch_norm_rows.h) for T, or null: other dtypes, or the
// wide_bf16_batch_norm switch off, take the loops below.
template <class T>
const Bf16BatchNormRows* bf16_rows() {
  if constexpr (std::is_same_v<T, BFloat16>) return bf16_batch_norm_rows();
  else return nullptr;
}

// A channel's coefficients, or a per-channel vector from channel c on, as the row loops take them (A is
// float for bf16, the only dtype they run; others get null and never call them).
template <class A>
const BnAffine* row_affine(const Affine<A>& k) {
  if constexpr (std::is_same_v<A, float>) return &k;
  else return nullptr;
}
template <class A>
const float* row_floats(const std::vector<A>& v, int64_t c) {
  if constexpr (std::is_same_v<A, float>) return v.data() + c;
  else return nullptr;
}

// Calls f(row, rows, c) over every (n, c) row of (N, C, S) in memory order, threads splitting the rows:
// each call `rows` rows of one sample, channels c .. c + rows - 1, from row index `row`.
template <class F>
void for_each_row_run(int64_t N, int64_t C, int64_t S, const F& f) {
  parallel_for_balanced(0, N * C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, S)),
                        [&](int64_t b, int64_t e) {
                          for (int64_t row = b; row < e;) {
                            const int64_t c = row % C, rows = std::min(e - row, C - c);
                            f(row, rows, c);
                            row += rows;
                          }
                        });
}

// out[k][c] = the sum over n of the k-th of the K values row_sums gives the (n, c) row:
// row_sums(row, rows, c, dst) writes K values a row for a run of rows (for_each_row_run's) into dst.
// The rows are walked in memory order on the threads and each channel adds its rows in order of n, so
// the sums do not depend on the thread count.
template <int K, class F>
void bf16_channel_sums(int64_t N, int64_t C, int64_t S, std::array<double*, K> out, const F& row_sums) {
  Scratch<double> per_row(N * C * K);  // every entry written below; no zero fill
  for_each_row_run(N, C, S,
                   [&](int64_t row, int64_t rows, int64_t c) { row_sums(row, rows, c, per_row.data() + row * K); });
  for (int k = 0; k < K; ++k) std::fill(out[size_t(k)], out[size_t(k)] + C, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int k = 0; k < K; ++k) out[size_t(k)][c] += per_row[size_t((n * C + c) * K + k)];
}


// ---- S == 1: rows of C channels side by side (channels-last activations as (N*H*W, C, 1), BatchNorm1d's
// (N, C)). The passes above would take each value as a run or row of its own: the sums go through
// channel_sums with S = 1 (rows in order, the channels as the inner loop), each value's term as those
// passes compute it for a row of one, so the bits are theirs, and the elementwise passes walk the rows.

// f(i, c) for every element i = n * C + c: threads split the rows.
template <class F>
void for_each_column_element(int64_t N, int64_t C, const F& f) {
  parallel_for_balanced(0, N, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n)
      for (int64_t c = 0; c < C; ++c) f(n * C + c, c);
  });
}

// One value's (x - centre)^2 as the passes above add it: f32 and f64 in double; f16 and bf16 in
// float (the float blocks and the bf16 rows), again in double where the float square overflows.
template <class T>
double squared_deviation(T x, double centre) {
  if constexpr (is_half_v<T>) {
    const float d = float(x) - float(centre), q = d * d;
    if (std::isfinite(q)) [[likely]]
      return double(q);
    const double e = double(float(x)) - double(float(centre));
    return e * e;
  } else {
    const double d = double(acc_t<T>(x)) - centre;
    return d * d;
  }
}

// One value's share of the backward's sums, gy (gated) and gy * (x - mean), as the passes above add it:
// f32 and f64 in double; f16 and bf16 the product in float, again in double where it overflows.
template <class T, bool RELU, class A>
Sums<2> grad_terms(T g, T x, A mean, const Affine<A>* k) {
  const A xa = A(x), ga = RELU ? gated<true>(A(g), xa, *k) : A(g);
  if constexpr (is_half_v<T>) {
    const float p = ga * (xa - mean);
    return {double(ga), std::isfinite(p) ? double(p) : double(ga) * (double(xa) - double(mean))};
  } else {
    return {double(ga), double(ga) * (double(xa) - double(mean))};
  }
}

// Every channel's forward coefficients (kernels/norm_math.h).
template <class A>
std::vector<Affine<A>> affines(const Tensor& weight, const Tensor& bias, const A* mean, const A* invstd, int64_t C) {
  const std::vector<A> w = param<A>(weight, C, A(1)), b = param<A>(bias, C, A(0));
  std::vector<Affine<A>> k(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) k[size_t(c)] = norm_math::affine(w[size_t(c)], b[size_t(c)], mean[c], invstd[c]);
  return k;
}

// Per-channel sums over the (n, s) elements of 16-bit (N, C, S) tensors, widened to float:
// sum_a[c] = the sum of a, or with `centre` and no b, of (a - centre[c])^2; with b, also
// sum_ab[c] = the sum of a * (b - centre[c]). Each row of S is summed in float vector lanes over
// blocks of kHalfBlock elements and the block sums added in double, in one order whatever the
// thread count. A bf16 value holds 8 significant bits, so a block's float sum keeps all of them;
// the double lanes of the wider types took twice f32's time on bf16 data. But bf16 has f32's range:
// a block whose float sum is not finite (squares past 3.4e38) is summed again in double, so only
// an infinite or NaN input gives an infinite or NaN sum. With `gate` (and b), a is first zeroed
// where channel c's pre-activation of b is <= 0: a ReLU's mask on the gradient.
constexpr int64_t kHalfBlock = 64;

// A block's sum of term(i, R) for i < m: in float lanes (R = float), or again in double (R = double)
// where the float sum overflowed.
template <class F>
double block_sum(int64_t m, F&& term) {
  float p = 0;
#pragma omp simd reduction(+ : p)
  for (int64_t i = 0; i < m; ++i) p += term(i, 0.0f);
  if (std::isfinite(p)) [[likely]]
    return double(p);
  double q = 0;
  for (int64_t i = 0; i < m; ++i) q += term(i, 0.0);
  return q;
}
template <class T>
void half_channel_sums(int64_t N, int64_t C, int64_t S, const T* a, double* sum_a, const float* centre = nullptr,
                       const T* b = nullptr, double* sum_ab = nullptr, const Affine<float>* gate = nullptr) {
  // bf16 widens inline (a shift the loop vectorises); f16 through the F16C blocks.
  const auto widen = [](const T* src, float* dst, int64_t m) {
    if constexpr (std::is_same_v<T, BFloat16>) {
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) dst[i] = float(src[i]);
    } else {
      load_floats<T>(reinterpret_cast<const char*>(src), sizeof(T), dst, m);
    }
  };
  const bool squares = centre && !b;
  parallel_for(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, N * S)), [&](int64_t cb, int64_t ce) {
    float fa[kHalfBlock], fb[kHalfBlock];
    for (int64_t c = cb; c < ce; ++c) {
      const float k = centre ? centre[c] : 0.0f;
      double t0 = 0, t1 = 0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t row = (n * C + c) * S;
        for (int64_t b0 = 0; b0 < S; b0 += kHalfBlock) {
          const int64_t m = std::min(kHalfBlock, S - b0);
          widen(a + row + b0, fa, m);
          if (gate) {
            widen(b + row + b0, fb, m);
            const Affine<float> g = gate[c];
            for (int64_t i = 0; i < m; ++i) fa[i] = gated<true>(fa[i], fb[i], g);
          }
          if (squares) {
            t0 += block_sum(m, [&]<class R>(int64_t i, R) { return (R(fa[i]) - R(k)) * (R(fa[i]) - R(k)); });
          } else {
            t0 += block_sum(m, [&]<class R>(int64_t i, R) { return R(fa[i]); });
          }
          if (!b) continue;
          if (!gate) widen(b + row + b0, fb, m);
          t1 += block_sum(m, [&]<class R>(int64_t i, R) { return R(fa[i]) * (R(fb[i]) - R(k)); });
        }
      }
      sum_a[c] = t0;
      if (b) sum_ab[c] = t1;
    }
  });
}

}  // namespace

// ---- batch norm ----------------------------------------------------------------------------

void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& var, const Tensor& invstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& residual, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps, bool relu) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = x.data_ptr<T>();
    T* yp = out.data_ptr<T>();
    A* mp = mean.data_ptr<A>();
    A* ip = invstd.data_ptr<A>();
    const Bf16BatchNormRows* rows = bf16_rows<T>();
    if (training) {
      // x (N, C, S) -> mean, var (C), over N * S values each.
      const double M = double(N * S);
      std::vector<double> sum(static_cast<size_t>(C)), sq(static_cast<size_t>(C));
      if (S == 1) {
        channel_sums<1>(N, C, 1, {sum.data()}, [&](int64_t i, int64_t, int64_t) { return Sums<1>{double(A(xp[i]))}; });
        for (double& s : sum) s /= M;
        channel_sums<1>(N, C, 1, {sq.data()}, [&](int64_t i, int64_t, int64_t c) {
          return Sums<1>{squared_deviation(xp[i], sum[size_t(c)])};
        });
      } else if (rows) {
        const uint16_t* xb = reinterpret_cast<const uint16_t*>(xp);
        bf16_channel_sums<1>(N, C, S, {sum.data()},
                             [&](int64_t row, int64_t m, int64_t, double* dst) { rows->sum(xb + row * S, m, S, dst); });
        for (double& s : sum) s /= M;
        const std::vector<float> centre(sum.begin(), sum.end());
        bf16_channel_sums<1>(N, C, S, {sq.data()}, [&](int64_t row, int64_t m, int64_t c, double* dst) {
          rows->squares(xb + row * S, m, S, centre.data() + c, dst);
        });
      } else if constexpr (is_half_v<T>) {
        half_channel_sums(N, C, S, xp, sum.data());
        for (double& s : sum) s /= M;
        const std::vector<float> centre(sum.begin(), sum.end());
        half_channel_sums(N, C, S, xp, sq.data(), centre.data());
      } else {
        channel_sums<1>(N, C, S, {sum.data()}, [&](int64_t i, int64_t, int64_t) { return Sums<1>{double(A(xp[i]))}; });
        for (double& s : sum) s /= M;
        channel_sums<1>(N, C, S, {sq.data()}, [&](int64_t i, int64_t, int64_t c) {
          const double d = double(A(xp[i])) - sum[size_t(c)];
          return Sums<1>{d * d};
        });
      }
      A* vp = var.data_ptr<A>();
      for (int64_t c = 0; c < C; ++c) {
        const double v = sq[size_t(c)] / M;
        mp[c] = A(sum[size_t(c)]);
        vp[c] = A(v);
        ip[c] = A(norm_math::inv_std(v, eps));
      }
      if (running_mean.defined()) {
        A *rm = running_mean.data_ptr<A>(), *rv = running_var.data_ptr<A>();
        const double n = M;
        const A keep = A(1.0 - momentum), take = A(momentum), take_var = A(momentum * n / (n - 1.0));
        for (int64_t c = 0; c < C; ++c) {
          rm[c] = rm[c] * keep + mp[c] * take;
          rv[c] = rv[c] * keep + vp[c] * take_var;
        }
      }
    }
    // y = activate((x - mean[c]) * a[c] + b[c] (+ r))
    const std::vector<Affine<A>> k = affines<A>(weight, bias, mp, ip, C);
    const T* rp = residual.defined() ? residual.data_ptr<T>() : nullptr;
    with_relu(relu, [&]<bool RELU>() {
      with_flag(rp != nullptr, [&]<bool RES>() {
        if (S == 1)
          return for_each_column_element(N, C, [&](int64_t i, int64_t c) {
            yp[i] = T(
                activate<RELU>(plus_residual<RES>(pre_activation(A(xp[i]), k[size_t(c)]), RES ? A(rp[i]) : A(0))));
          });
        if (rows) {
          const auto bits = [](const T* p) { return reinterpret_cast<const uint16_t*>(p); };
          return for_each_span(N, C, S, [&](int64_t i, int64_t m, int64_t len, int64_t c) {
            rows->forward(bits(xp + i), RES ? bits(rp + i) : nullptr, reinterpret_cast<uint16_t*>(yp + i), m, len,
                          row_affine(k[size_t(c)]), RELU);
          });
        }
        for_each_run(N, C, S, [&](int64_t i, int64_t end, int64_t c) {
          const Affine<A> kc = k[size_t(c)];
          if constexpr (is_half_v<T>)
            map_floats(xp, rp, yp, i, end,
                       [&](float x, float r) { return activate<RELU>(plus_residual<RES>(pre_activation(x, kc), r)); });
          else
            for (; i < end; ++i)
              yp[i] = T(activate<RELU>(plus_residual<RES>(pre_activation(A(xp[i]), kc), RES ? A(rp[i]) : A(0))));
        });
      });
    });
  });
}

namespace {

// batch_norm_backward for one dtype, with gy gated by the ReLU's mask when RELU.
template <class T, bool RELU>
void batch_norm_backward_as(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                            const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                            const Tensor& bias, bool training) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  using A = acc_t<T>;
  const T* xp = x.data_ptr<T>();
  const T* gp = grad_out.data_ptr<T>();
  const A* mp = mean.data_ptr<A>();
  const A* ip = invstd.data_ptr<A>();
  // The forward's coefficients, for the ReLU's mask.
  const std::vector<Affine<A>> fwd = RELU ? affines<A>(weight, bias, mp, ip, C) : std::vector<Affine<A>>();
  const Bf16BatchNormRows* rows = bf16_rows<T>();
  // sdy[c] = sum gy, sdx[c] = sum gy * (x - mean): (C)
  std::vector<double> sdy(static_cast<size_t>(C)), sdx(static_cast<size_t>(C));
  // One value's share of both sums, for the passes that take a value at a time.
  const auto terms = [&](int64_t i, int64_t, int64_t c) {
    return grad_terms<T, RELU>(gp[i], xp[i], mp[c], RELU ? &fwd[size_t(c)] : nullptr);
  };
  if (training || grad_w.defined() || grad_b.defined()) {
    if (S == 1) {
      channel_sums<2>(N, C, 1, {sdy.data(), sdx.data()}, terms);
    } else if (rows) {
      const uint16_t *gb = reinterpret_cast<const uint16_t*>(gp), *xb = reinterpret_cast<const uint16_t*>(xp);
      const std::vector<float> centre(mp, mp + C);
      bf16_channel_sums<2>(N, C, S, {sdy.data(), sdx.data()}, [&](int64_t row, int64_t m, int64_t c, double* dst) {
        rows->grad_sums(gb + row * S, xb + row * S, m, S, centre.data() + c,
                        RELU ? row_affine(fwd[size_t(c)]) : nullptr, dst);
      });
    } else if constexpr (is_half_v<T>) {
      half_channel_sums(N, C, S, gp, sdy.data(), mp, xp, sdx.data(), RELU ? fwd.data() : nullptr);
    } else if constexpr (std::is_same_v<T, float>) {
      f32_backward_sums<RELU>(N, C, S, xp, gp, mp, RELU ? fwd.data() : nullptr, sdy.data(), sdx.data());
    } else {
      channel_sums<2>(N, C, S, {sdy.data(), sdx.data()}, terms);
    }
  }
  if (grad_w.defined()) {
    A* gw = grad_w.data_ptr<A>();
    for (int64_t c = 0; c < C; ++c) gw[c] = A(sdx[size_t(c)] * double(ip[c]));
  }
  if (grad_b.defined()) {
    A* gb = grad_b.data_ptr<A>();
    for (int64_t c = 0; c < C; ++c) gb[c] = A(sdy[size_t(c)]);
  }
  if (!grad_x.defined()) return;
  // gx = gy * p[c] + x * q[c] + r[c]; training: a (gy - mean(gy) - xhat * mean(gy * xhat)), a = w * invstd.
  std::vector<A> p = param<A>(weight, C, A(1)), q(size_t(C), A(0)), r(size_t(C), A(0));
  const double M = double(N * S);
  for (int64_t c = 0; c < C; ++c) {
    const double a = double(p[size_t(c)]) * double(ip[c]);
    p[size_t(c)] = A(a);
    if (training) {
      const double k = a * double(ip[c]) * double(ip[c]) * sdx[size_t(c)] / M;  // a * invstd * mean(gy * xhat)
      q[size_t(c)] = A(-k);
      r[size_t(c)] = A(k * double(mp[c]) - a * sdy[size_t(c)] / M);
    }
  }
  T* gx = grad_x.data_ptr<T>();
  if (S == 1)
    return for_each_column_element(N, C, [&](int64_t i, int64_t c) {
      const Affine<A> kc = RELU ? fwd[size_t(c)] : Affine<A>{};
      gx[i] = T(gated<RELU>(A(gp[i]), A(xp[i]), kc) * p[size_t(c)] + A(xp[i]) * q[size_t(c)] + r[size_t(c)]);
    });
  if (rows)
    return for_each_span(N, C, S, [&](int64_t i, int64_t m, int64_t len, int64_t c) {
      rows->backward(reinterpret_cast<const uint16_t*>(gp + i), reinterpret_cast<const uint16_t*>(xp + i),
                     reinterpret_cast<uint16_t*>(gx + i), m, len, row_floats(p, c), row_floats(q, c), row_floats(r, c),
                     RELU ? row_affine(fwd[size_t(c)]) : nullptr);
    });
  for_each_run(N, C, S, [&](int64_t i, int64_t end, int64_t c) {
    const A pc = p[size_t(c)], qc = q[size_t(c)], rc = r[size_t(c)];
    const Affine<A> kc = RELU ? fwd[size_t(c)] : Affine<A>{};
    if constexpr (is_half_v<T>)
      map_floats(gp, xp, gx, i, end, [&](float g, float x) { return gated<RELU>(g, x, kc) * pc + x * qc + rc; });
    else
      for (; i < end; ++i) gx[i] = T(gated<RELU>(A(gp[i]), A(xp[i]), kc) * pc + A(xp[i]) * qc + rc);
  });
}

}  // namespace

void batch_norm_backward(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                         const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                         const Tensor& bias, bool training, bool relu) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class T>() {
    with_relu(relu, [&]<bool RELU>() {
      batch_norm_backward_as<T, RELU>(grad_x, grad_w, grad_b, grad_out, x, mean, invstd, weight, bias, training);
    });
  });
}

// ---- group norm (and layer norm) -------------------------------------------------------------

// Layer norm on f32 (one group, one element per channel) runs its rows on float vectors
// (cpu/layer_norm_rows.h); threads split the rows, or for the parameter gradients the channels.
namespace {

void layer_norm_rows_f32(int64_t N, int64_t C, const float* x, float* y, float* mean, float* rstd, const float* w,
                         const float* b, double eps) {
  const LayerNormRows& rows = layer_norm_rows();
  parallel_for(0, N, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) rows.forward(x + r * C, y + r * C, C, w, b, eps, mean[r], rstd[r]);
  });
}

// gx, and (when asked) gw[c] = sum over rows of gy * xhat and gb[c] = sum of gy, in double. One pass
// over the rows: each row's gx, then its share of the parameter sums while it is still in L1, into
// its block's partial sums; the blocks are added in order at the end. (Walking the rows again for the
// parameters read x and gy from memory twice: at 2048 rows of 384, cold, that pass cost as much as gx.)
void layer_norm_backward_rows_f32(int64_t N, int64_t C, const float* x, const float* g, const float* mean,
                                  const float* rstd, const float* w, float* gx, float* gw, float* gb) {
  const LayerNormRows& rows = layer_norm_rows();
  const bool params = gw || gb;
  // the parameter gradients in blocks of rows (cpu/row_blocks.h)
  const int64_t block = params ? sum_block_rows(N) : 1, blocks = (N + block - 1) / block;
  Scratch<double> sums(params ? blocks * 2 * C : 0, 0.0);  // block b: sw at 2bC, sb at (2b + 1)C
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, block * C));
  parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t r = b0 * block; r < std::min(N, b1 * block); ++r) {
      if (gx) rows.backward(x + r * C, g + r * C, C, mean[r], rstd[r], w, gx + r * C);
      if (params) {
        double* sw = sums.data() + r / block * 2 * C;
        rows.param_grads(x + r * C, g + r * C, C, mean[r], rstd[r], sw, sw + C);
      }
    }
  });
  if (!params) return;
  parallel_for(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, blocks)), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double sw = 0, sb = 0;
      for (int64_t b = 0; b < blocks; ++b) sw += sums[(2 * b) * C + c], sb += sums[(2 * b + 1) * C + c];
      if (gw) gw[c] = float(sw);
      if (gb) gb[c] = float(sb);
    }
  });
}

}  // namespace

void group_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t groups, double eps) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), K = C / groups, L = K * S;
  dispatch_floating(x.dtype(), "group_norm", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = x.data_ptr<T>();
    T* yp = out.data_ptr<T>();
    A* mp = mean.data_ptr<A>();
    A* rp = rstd.data_ptr<A>();
    const std::vector<A> w = param<A>(weight, C, A(1)), b = param<A>(bias, C, A(0));
    if constexpr (std::is_same_v<T, float>) {
      if (S == 1 && groups == 1) return layer_norm_rows_f32(N, C, xp, yp, mp, rp, w.data(), b.data(), eps);
    }
    // One (n, g) row of K channels x S: its stats, then y = (x - mean) * rstd * w[c] + b[c].
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, L));
    parallel_for(0, N * groups, grain, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const int64_t i0 = r * L, c0 = (r % groups) * K;
        auto value = [&](int64_t i, int64_t) { return Sums<1>{double(A(xp[i]))}; };
        const double mu = row_sum<1>(i0, c0, K, S, value)[0] / double(L);
        auto sq_dev = [&](int64_t i, int64_t) {
          const double d = double(A(xp[i])) - mu;
          return Sums<1>{d * d};
        };
        const double v = row_sum<1>(i0, c0, K, S, sq_dev)[0] / double(L);
        const A m = A(mu), rs = A(1.0 / std::sqrt(v + eps));
        mp[r] = m;
        rp[r] = rs;
        // (x - mean) * a + b rather than x * a + (b - mean * a): far from 0, the two products of the
        // latter cancel and lose the deviation's bits.
        for (int64_t k = 0; k < K; ++k) {
          const A a = rs * w[size_t(c0 + k)], bc = b[size_t(c0 + k)];
          const int64_t o = i0 + k * S;
          for (int64_t s = 0; s < S; ++s) yp[o + s] = T((A(xp[o + s]) - m) * a + bc);
        }
      }
    });
  });
}

void group_norm_backward(const Tensor& grad_x, const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), K = C / groups, L = K * S;
  dispatch_floating(x.dtype(), "group_norm_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = x.data_ptr<T>();
    const T* gp = grad_out.data_ptr<T>();
    const A* mp = mean.data_ptr<A>();
    const A* rp = rstd.data_ptr<A>();
    const std::vector<A> w = param<A>(weight, C, A(1));
    if constexpr (std::is_same_v<T, float>) {
      if (S == 1 && groups == 1)
        return layer_norm_backward_rows_f32(N, C, xp, gp, mp, rp, w.data(),
                                            grad_x.defined() ? grad_x.data_ptr<float>() : nullptr,
                                            grad_w.defined() ? grad_w.data_ptr<float>() : nullptr,
                                            grad_b.defined() ? grad_b.data_ptr<float>() : nullptr);
    }
    // gw[c] = sum gy * xhat, gb[c] = sum gy, over (n, s).
    if (grad_w.defined() || grad_b.defined()) {
      std::vector<double> sw(static_cast<size_t>(C)), sb(static_cast<size_t>(C));
      channel_sums<2>(N, C, S, {sw.data(), sb.data()}, [&](int64_t i, int64_t n, int64_t c) {
        const int64_t r = groups == 1 ? n : n * groups + c / K;
        const double g = double(A(gp[i]));
        return Sums<2>{g * (double(A(xp[i])) - double(mp[r])) * double(rp[r]), g};
      });
      if (grad_w.defined()) {
        A* gw = grad_w.data_ptr<A>();
        for (int64_t c = 0; c < C; ++c) gw[c] = A(sw[size_t(c)]);
      }
      if (grad_b.defined()) {
        A* gb = grad_b.data_ptr<A>();
        for (int64_t c = 0; c < C; ++c) gb[c] = A(sb[size_t(c)]);
      }
    }
    if (!grad_x.defined()) return;
    // Per row, h = gy * w: gx = rstd * (h - mean(h) - xhat * mean(h * xhat)).
    T* gx = grad_x.data_ptr<T>();
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, L));
    parallel_for(0, N * groups, grain, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const int64_t i0 = r * L, c0 = (r % groups) * K;
        const double mu = double(mp[r]), rs = double(rp[r]);
        const Sums<2> s = row_sum<2>(i0, c0, K, S, [&](int64_t i, int64_t c) {
          const double h = double(A(gp[i])) * double(w[size_t(c)]);
          return Sums<2>{h, h * (double(A(xp[i])) - mu)};
        });
        const double mh = s[0] / double(L), mhx = rs * s[1] / double(L);  // mean(h), mean(h * xhat)
        // xhat = (x - mean) * rstd first: x * rstd^3 would fall below float's range (and x * q + shift
        // cancel) for rows far from 0
        const A q = A(-rs * mhx), sh = A(-rs * mh), m = A(mu), r_s = A(rs);
        for (int64_t c = 0; c < K; ++c) {
          const A a = A(rs * double(w[size_t(c0 + c)]));
          const int64_t o = i0 + c * S;
          for (int64_t j = 0; j < S; ++j) gx[o + j] = T(A(gp[o + j]) * a + (A(xp[o + j]) - m) * r_s * q + sh);
        }
      }
    });
  });
}

// ---- dropout -------------------------------------------------------------------------------

// Keep element i when word i % 4 of Philox(seed, offset + i / 4) >= p * 2^32, compared as integers
// (w >= ceil(p * 2^32), the same test for a 32-bit word), with Philox inlined into the loop.
void dropout_mask(const Tensor& mask, double p, uint64_t seed, uint64_t offset) {
  const int64_t n = mask.numel();
  bool* m = mask.data_ptr<bool>();
  const uint64_t threshold = uint64_t(std::ceil(p * 4294967296.0));
  parallel_for(0, (n + 3) / 4, kGrainSize / 16, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      const PhiloxWords r = philox4x32_10(seed, offset + uint64_t(blk));
      const int64_t i = blk * 4;
      if (i + 4 <= n) {
        for (int j = 0; j < 4; ++j) m[i + j] = uint64_t(r.w[j]) >= threshold;
      } else {
        for (int j = 0; i + j < n; ++j) m[i + j] = uint64_t(r.w[j]) >= threshold;
      }
    }
  });
}

// out = mask ? in * scale : 0 (dropout forward, and its backward on the gradient). Contiguous
// operands select on the bits (select_bits.h): a branch on a random mask mispredicts.
void masked_scale(const Tensor& out, const Tensor& in, const Tensor& mask, double scale) {
  if (out.numel() == 0) return;
  StridedLoop<3> loop({&out, &in, &mask});
  dispatch_floating(out.dtype(), "dropout", [&]<class T>() {
    using A = acc_t<T>;
    const A s = A(scale);
    loop.run([&](char* const* p, const int64_t* st, int64_t n) {
      if (st[0] == sizeof(T) && st[1] == sizeof(T) && st[2] == 1) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        const bool* keep = reinterpret_cast<const bool*>(p[2]);
        const T zero = T(A(0));
        for (int64_t i = 0; i < n; ++i) o[i] = select_bits(bool_at(keep + i), T(A(x[i]) * s), zero);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = *reinterpret_cast<const bool*>(p[2] + i * st[2]);
        *reinterpret_cast<T*>(p[0] + i * st[0]) = T(keep ? A(*reinterpret_cast<const T*>(p[1] + i * st[1])) * s : A(0));
      }
    });
  });
}

const LayerNormRows& layer_norm_rows4() {
  using f32x4 = float __attribute__((vector_size(16)));
  static constexpr LayerNormRows r = layer_norm_rows_impl::rows<f32x4>();
  return r;
}

const LayerNormRows& layer_norm_rows() {
  if (toggles::wide_layer_norm()) {
    if (has_avx512f()) return layer_norm_rows16();
    if (has_avx2_fma()) return layer_norm_rows8();
  }
  return layer_norm_rows4();
}

const Bf16BatchNormRows& bf16_batch_norm_rows4() {
  using f32x4 = float __attribute__((vector_size(16)));
  static constexpr Bf16BatchNormRows r = bf16_batch_norm_rows_impl::rows<f32x4>();
  return r;
}

const Bf16BatchNormRows* bf16_batch_norm_rows() {
  if (!toggles::wide_bf16_batch_norm()) return nullptr;
  if (has_avx512f()) return &bf16_batch_norm_rows16();
  if (has_avx2_fma()) return &bf16_batch_norm_rows8();
  return &bf16_batch_norm_rows4();
}

}  // namespace mdl::cpu
