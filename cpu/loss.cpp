// CPU kernels for the fused softmax cross-entropy: one walk per (n, d) row of C logits gives the
// max, the log-sum-exp and the loss with its label smoothing; the backward finds the max again and
// rebuilds the softmax from the saved log of the shifted sum. f32 rows (and f16/bf16 or strided
// rows, copied into a float row first) run on 4-float vectors with a polynomial exp; f64 runs
// plain loops with std::exp. Sums over classes fold into double every kBlock classes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/vec4.h"
#include "kernels/loss.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

constexpr int64_t kBlock = 1024;

using namespace vec4;

inline float exp_acc(float x) { return exp4(splat(x))[0]; }
inline double exp_acc(double x) { return std::exp(x); }

template <class A>
inline A nan_max(A m, A v) {
  return (v > m || v != v) && m == m ? v : m;
}

// The max of a contiguous row of C; NaN if any element is NaN.
template <class A>
A row_max(const A* p, int64_t C) {
  A m = -std::numeric_limits<A>::infinity();
  int64_t c = 0;
  if constexpr (std::is_same_v<A, float>) {
    f4 mv = splat(m);
    for (; c + 4 <= C; c += 4) {
      const f4 v = load4(p + c);
      mv = ((v > mv) | (v != v)) & (mv == mv) ? v : mv;
    }
    for (int j = 0; j < 4; ++j) m = nan_max(m, mv[j]);
  }
  for (; c < C; ++c) m = nan_max(m, p[c]);
  return m;
}

// sum_c exp(p[c] - m) and sum_c p[c] of a contiguous row.
template <class A>
void row_sums(const A* p, int64_t C, A m, double& sum_exp, double& sum_x) {
  sum_exp = 0;
  sum_x = 0;
  for (int64_t b = 0; b < C; b += kBlock) {
    const int64_t e = std::min(C, b + kBlock);
    int64_t c = b;
    double se = 0, sx = 0;
    if constexpr (std::is_same_v<A, float>) {
      f4 ev = splat(0), xv = splat(0);
      for (; c + 4 <= e; c += 4) {
        const f4 v = load4(p + c);
        ev += exp4(v - m);
        xv += v;
      }
      se = hsum(ev);
      sx = hsum(xv);
    }
    for (; c < e; ++c) {
      se += double(exp_acc(A(p[c] - m)));
      sx += double(p[c]);
    }
    sum_exp += se;
    sum_x += sx;
  }
}

// out[c] = g * (exp(p[c] - m - logsum) - off) for a contiguous row.
template <class A>
void row_grad(A* out, const A* p, int64_t C, A m, A logsum, A g, A off) {
  int64_t c = 0;
  if constexpr (std::is_same_v<A, float>) {
    for (; c + 4 <= C; c += 4) store4(out + c, g * (exp4((load4(p + c) - m) - logsum) - off));
  }
  for (; c < C; ++c) out[c] = g * (exp_acc(A((p[c] - m) - logsum)) - off);
}

// Row r of logits (N, C, D), as a contiguous row of A: in place for contiguous rows of A,
// else copied (converted) into buf.
template <class T, class A>
const A* read_row(const T* x, int64_t r, int64_t C, int64_t D, A* buf) {
  const T* p = x + (r / D) * C * D + r % D;
  if constexpr (std::is_same_v<T, A>)
    if (D == 1) return p;
  for (int64_t c = 0; c < C; ++c) buf[c] = A(p[c * D]);
  return buf;
}

}  // namespace

void cross_entropy_forward(const Tensor& loss, const Tensor& logsum, const Tensor& logits, const Tensor& target,
                           int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits.size(0), C = logits.size(1), D = logits.size(2);
  const int64_t* tp = target.data_ptr<int64_t>();
  const double ls = label_smoothing;
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = logits.data_ptr<T>();
    A* lp = loss.data_ptr<A>();
    A* sp = logsum.data_ptr<A>();
    parallel_for(0, N * D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      std::vector<A> buf(static_cast<size_t>(C));
      for (int64_t r = b; r < e; ++r) {
        const A* p = read_row(xp, r, C, D, buf.data());  // (C)
        const A m = row_max(p, C);
        double se, sx;
        row_sums(p, C, m, se, sx);
        sp[r] = A(std::log(se));
        const int64_t t = tp[r];
        if (t == ignore_index) {
          lp[r] = A(0);
          continue;
        }
        const double lse = double(m) + std::log(se);
        double v = (1.0 - ls) * (lse - double(p[t]));
        if (ls > 0) v += ls * (lse - sx / double(C));
        lp[r] = A(v);
      }
    });
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, const Tensor& logsum, int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits.size(0), C = logits.size(1), D = logits.size(2);
  const int64_t gs0 = grad_loss.stride(0), gs1 = grad_loss.stride(1);
  const int64_t* tp = target.data_ptr<int64_t>();
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = logits.data_ptr<T>();
    const A* gl = grad_loss.data_ptr<A>();
    const A* sp = logsum.data_ptr<A>();
    T* gx = grad_logits.data_ptr<T>();
    const A off = A(label_smoothing / double(C)), hit = A(1.0 - label_smoothing);
    parallel_for(0, N * D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      std::vector<A> in(static_cast<size_t>(C)), out(static_cast<size_t>(C));
      for (int64_t r = b; r < e; ++r) {
        const int64_t n = r / D, d = r % D, t = tp[r];
        T* q = gx + n * C * D + d;  // (C) with stride D
        const bool direct = std::is_same_v<T, A> && D == 1;
        A* o = direct ? reinterpret_cast<A*>(q) : out.data();
        if (t == ignore_index) {
          std::fill(o, o + C, A(0));
        } else {
          const A* p = read_row(xp, r, C, D, in.data());
          const A g = gl[n * gs0 + d * gs1];
          row_grad(o, p, C, row_max(p, C), sp[r], g, off);
          o[t] -= g * hit;
        }
        if (!direct)
          for (int64_t c = 0; c < C; ++c) q[c * D] = T(o[c]);
      }
    });
  });
}

}  // namespace mdl::cpu
