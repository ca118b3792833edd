// CPU kernels for the fused softmax cross-entropy: one walk per (n, d) row of C logits gives the
// max, the log-sum-exp and the loss with its label smoothing, the loss formed from the shifted
// logits x - max so that large logits cancel before they are rounded; the backward finds the max
// again and rebuilds the softmax from the saved log of the shifted sum. f32 rows (and f16/bf16 or
// strided rows, copied into a float row first) run SoftmaxRows (cpu/softmax_rows.h): vectors of 16,
// 8 or 4 floats with a polynomial exp; f64 runs plain loops with std::exp. Sums over classes fold
// into double every kSoftmaxBlock classes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/softmax_rows.h"
#include "kernels/loss.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

namespace {

inline double exp_acc(double x) { return std::exp(x); }

inline double nan_max(double m, double v) { return (v > m || v != v) && m == m ? v : m; }

// The f64 row loops, plain; f32 rows take the SoftmaxRows the kernel chose.
double row_max(const SoftmaxRows&, const double* p, int64_t C) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < C; ++c) m = nan_max(m, p[c]);
  return m;
}
float row_max(const SoftmaxRows& rows, const float* p, int64_t C) { return rows.max(p, C); }

void row_sums(const SoftmaxRows&, const double* p, int64_t C, double m, double& sum_exp, double& sum_x) {
  sum_exp = 0;
  sum_x = 0;
  for (int64_t b = 0; b < C; b += kSoftmaxBlock) {
    const int64_t e = std::min(C, b + kSoftmaxBlock);
    double se = 0, sx = 0;
    for (int64_t c = b; c < e; ++c) {
      se += exp_acc(p[c] - m);
      sx += p[c] - m;
    }
    sum_exp += se;
    sum_x += sx;
  }
}
void row_sums(const SoftmaxRows& rows, const float* p, int64_t C, float m, double& sum_exp, double& sum_x) {
  rows.sums(p, C, m, sum_exp, sum_x);
}

void row_grad(const SoftmaxRows&, double* out, const double* p, int64_t C, double m, double logsum, double g,
              double off) {
  for (int64_t c = 0; c < C; ++c) out[c] = g * (exp_acc((p[c] - m) - logsum) - off);
}
void row_grad(const SoftmaxRows& rows, float* out, const float* p, int64_t C, float m, float logsum, float g,
              float off) {
  rows.grad(out, p, C, m, logsum, g, off);
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
    const SoftmaxRows& rows = softmax_rows();
    parallel_for(0, N * D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      std::vector<A> buf(static_cast<size_t>(C));
      for (int64_t r = b; r < e; ++r) {
        const A* p = read_row(xp, r, C, D, buf.data());  // (C)
        const A m = row_max(rows, p, C);
        double se, sx;
        row_sums(rows, p, C, m, se, sx);
        sp[r] = A(std::log(se));
        const int64_t t = tp[r];
        if (t == ignore_index) {
          lp[r] = A(0);
          continue;
        }
        // m - x[t] first: m + log(se) would round log(se) away where |m| is large.
        const double log_se = std::log(se);
        double v = (1.0 - ls) * ((double(m) - double(p[t])) + log_se);
        if (ls > 0) v += ls * (log_se - sx / double(C));
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
    const SoftmaxRows& rows = softmax_rows();
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
          row_grad(rows, o, p, C, row_max(rows, p, C), sp[r], g, off);
          o[t] -= g * hit;
        }
        if (!direct)
          for (int64_t c = 0; c < C; ++c) q[c * D] = T(o[c]);
      }
    });
  });
}

}  // namespace mdl::cpu
