// CPU kernels for the fused softmax cross-entropy: one walk per (n, d) row of C logits gives the
// max, the logsumexp and the loss with its label smoothing; the backward rebuilds the softmax from
// the saved logsumexp. Math runs in float (double for f64), the sums over classes in double.
#include <cmath>
#include <limits>

#include "tensor/kernels_norm.h"
#include "tensor/parallel.h"

namespace mdl::cpu {

void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& target,
                           int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits.size(0), C = logits.size(1), D = logits.size(2);
  const int64_t* tp = target.data_ptr<int64_t>();
  const double ls = label_smoothing;
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = logits.data_ptr<T>();
    A* lp = loss.data_ptr<A>();
    A* ep = lse.data_ptr<A>();
    parallel_for(0, N * D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* p = xp + (r / D) * C * D + r % D;  // (C) with stride D
        A m = -std::numeric_limits<A>::infinity();
        for (int64_t c = 0; c < C; ++c) {
          const A v = A(p[c * D]);
          if (v != v) {  // NaN wins
            m = v;
            break;
          }
          m = v > m ? v : m;
        }
        double s = 0, sx = 0;
        for (int64_t c = 0; c < C; ++c) {
          const A v = A(p[c * D]);
          s += double(std::exp(v - m));
          sx += double(v);
        }
        const double l = double(m) + std::log(s);
        ep[r] = A(l);
        const int64_t t = tp[r];
        if (t == ignore_index) {
          lp[r] = A(0);
          continue;
        }
        double v = (1.0 - ls) * (l - double(A(p[t * D])));
        if (ls > 0) v += ls * (l - sx / double(C));
        lp[r] = A(v);
      }
    });
  });
}

void cross_entropy_backward(const Tensor& grad_logits, const Tensor& grad_loss, const Tensor& logits,
                            const Tensor& target, const Tensor& lse, int64_t ignore_index, double label_smoothing) {
  const int64_t N = logits.size(0), C = logits.size(1), D = logits.size(2);
  const int64_t gs0 = grad_loss.stride(0), gs1 = grad_loss.stride(1);
  const int64_t* tp = target.data_ptr<int64_t>();
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = logits.data_ptr<T>();
    const A* gl = grad_loss.data_ptr<A>();
    const A* ep = lse.data_ptr<A>();
    T* gx = grad_logits.data_ptr<T>();
    const A off = A(label_smoothing / double(C)), hit = A(1.0 - label_smoothing);
    parallel_for(0, N * D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t n = r / D, d = r % D, base = n * C * D + d;
        const int64_t t = tp[r];
        if (t == ignore_index) {
          for (int64_t c = 0; c < C; ++c) gx[base + c * D] = T(A(0));
          continue;
        }
        const A g = gl[n * gs0 + d * gs1], l = ep[r];
        for (int64_t c = 0; c < C; ++c) {
          const A sm = std::exp(A(xp[base + c * D]) - l);
          gx[base + c * D] = T(g * (sm - off - (c == t ? hit : A(0))));
        }
      }
    });
  });
}

}  // namespace mdl::cpu

namespace mdl::kernels {

void register_loss_kernels() {
  cross_entropy_forward.cpu = &cpu::cross_entropy_forward;
  cross_entropy_backward.cpu = &cpu::cross_entropy_backward;
}

}  // namespace mdl::kernels
