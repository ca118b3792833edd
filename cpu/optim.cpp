// CPU optimizer steps (Adam/AdamW, SGD), their step counters, and the sum of squares behind
// clip_grad_norm_.
// One pass over contiguous memory per parameter, threaded in static chunks, no allocation; a
// multi-tensor step also writes each parameter's 16-bit copy, from each block of 2048 just updated
// (in L1), where it has one; SGD, Adam and the sum of squares vectorise (this file is built with
// -fno-math-errno, without which g++ keeps Adam's sqrt scalar; the steps take their
// hyperparameters by value, as values captured by reference might alias the stores).
#include <algorithm>
#include <cmath>

#include "tensor/dtype.h"
#include "tensor/half.h"
#include "cpu/kernels.h"
#include "tensor/parallel.h"

namespace mdl::cpu {
namespace {

constexpr int64_t kOptimGrain = 1 << 16;

// p, g (n) of type P; m, v, vmax (n) f32. C is the compute type: double for f64 params, else float.
// omb1, omb2 are 1 - beta from the betas in double, as PyTorch's: 1 - float(0.99999) is 1.00136e-5.
template <class P, bool kAms, bool kL2, class C>
void adam_chunk(P* p, const P* g, float* m, float* v, float* vmax, int64_t b, int64_t e, C b1, C b2, C omb1, C omb2,
                C eps, C scale, C l2, C keep, C step_size, C bc2_sqrt) {
  for (int64_t i = b; i < e; ++i) {
    C pi = C(p[i]);
    C gi = C(g[i]) * scale;
    if constexpr (kL2) gi += l2 * pi;
    pi *= keep;
    C mi = b1 * C(m[i]) + omb1 * gi;
    C vi = b2 * C(v[i]) + omb2 * gi * gi;
    m[i] = float(mi);
    v[i] = float(vi);
    C vd = vi;
    if constexpr (kAms) {
      vd = std::max(C(vmax[i]), vi);
      vmax[i] = float(vd);
    }
    C denom = std::sqrt(vd) / bc2_sqrt + eps;
    p[i] = P(pi - step_size * mi / denom);
  }
}

// A parameter's 16-bit copy (kernels::StepTensors::copy), or none when data is null.
struct CopyOut {
  void* data = nullptr;
  DType dtype = kF16;
};
CopyOut copy_of(const Tensor& copy) { return copy.defined() ? CopyOut{copy.raw_data(), copy.dtype()} : CopyOut{}; }

// copy[b, e) = p[b, e) rounded to the copy's dtype, from the chunk just updated (still in cache).
template <class Q, class P>
void write_copy(Q* q, const P* p, int64_t b, int64_t e) {
  if constexpr (std::is_same_v<P, float>) from_f32(p + b, q + b, e - b);
  else
    for (int64_t i = b; i < e; ++i) q[i] = Q(float(p[i]));
}
template <class P>
void write_copy(const CopyOut& c, const P* p, int64_t b, int64_t e) {
  if (!c.data) return;
  if (c.dtype == kBF16) write_copy(static_cast<BFloat16*>(c.data), p, b, e);
  else write_copy(static_cast<Half*>(c.data), p, b, e);
}

// f(b, e) over [begin, end) in blocks small enough for L1, so that a parameter's 16-bit copy is
// written from the block just updated rather than read back from memory.
constexpr int64_t kCopyBlock = 2048;
template <class F>
void for_each_block(int64_t begin, int64_t end, const F& f) {
  for (int64_t b = begin; b < end; b += kCopyBlock) f(b, std::min(end, b + kCopyBlock));
}

template <class P, bool kAms>
void adam_loop(P* p, const P* g, float* m, float* v, float* vmax, const CopyOut& copy, int64_t n,
               const kernels::AdamParams& hp, int64_t step, double lr) {
  using C = std::conditional_t<std::is_same_v<P, double>, double, float>;
  const C b1 = C(hp.beta1), b2 = C(hp.beta2), eps = C(hp.eps), scale = C(hp.grad_scale);
  const C omb1 = C(1.0 - hp.beta1), omb2 = C(1.0 - hp.beta2);
  const C bc1 = C(1.0 - std::pow(hp.beta1, double(step)));
  const C bc2_sqrt = C(std::sqrt(1.0 - std::pow(hp.beta2, double(step))));
  const C step_size = C(lr) / bc1;
  const C l2 = hp.decoupled ? C(0) : C(hp.weight_decay);
  const C keep = hp.decoupled ? C(1.0 - lr * hp.weight_decay) : C(1);
  parallel_for(0, n, kOptimGrain, [&](int64_t b, int64_t e) {
    for_each_block(b, e, [&](int64_t bb, int64_t be) {
      // The L2 term only where it is not 0, as PyTorch: 0 * an infinite parameter is NaN.
      if (l2 != C(0))
        adam_chunk<P, kAms, true, C>(p, g, m, v, vmax, bb, be, b1, b2, omb1, omb2, eps, scale, l2, keep, step_size,
                                     bc2_sqrt);
      else
        adam_chunk<P, kAms, false, C>(p, g, m, v, vmax, bb, be, b1, b2, omb1, omb2, eps, scale, l2, keep, step_size,
                                      bc2_sqrt);
      write_copy(copy, p, bb, be);
    });
  });
}

bool skipped(const kernels::DeviceStepState& d) { return d.found_inf && *d.found_inf != 0.0f; }

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const CopyOut& copy, const kernels::AdamParams& hp) {
  if (skipped(hp.device)) return;
  const int64_t step = hp.device.step ? *hp.device.step : hp.step;
  const double lr = hp.device.lr ? *hp.device.lr : hp.lr;
  float* vmax = hp.amsgrad ? max_exp_avg_sq.data_ptr<float>() : nullptr;
  dispatch_floating(param.dtype(), "adam_step", [&]<class P>() {
    auto* p = param.data_ptr<P>();
    const auto* g = grad.data_ptr<P>();
    float* m = exp_avg.data_ptr<float>();
    float* v = exp_avg_sq.data_ptr<float>();
    if (hp.amsgrad) adam_loop<P, true>(p, g, m, v, vmax, copy, param.numel(), hp, step, lr);
    else adam_loop<P, false>(p, g, m, v, vmax, copy, param.numel(), hp, step, lr);
  });
}

// p, g [b, e) of type P; buf [b, e) f32 when kMomentum. The hyperparameters come by value, so that
// the loop vectorises (read through the caller's references, they might alias p's stores).
template <class P, bool kDecay, bool kMomentum, class C>
void sgd_chunk(P* p, const P* g, float* buf, int64_t b, int64_t e, C lr, C mom, C damp, C wd, C scale, bool first,
               bool nesterov) {
  for (int64_t i = b; i < e; ++i) {
    C pi = C(p[i]);
    C gi = C(g[i]) * scale;
    if constexpr (kDecay) gi += wd * pi;
    if constexpr (kMomentum) {
      C bi = first ? gi : mom * C(buf[i]) + damp * gi;
      buf[i] = float(bi);
      gi = nesterov ? gi + mom * bi : bi;
    }
    p[i] = P(pi - lr * gi);
  }
}

template <class P>
void sgd_loop(P* p, const P* g, float* buf, const CopyOut& copy, int64_t n, const kernels::SGDParams& hp, bool first) {
  using C = std::conditional_t<std::is_same_v<P, double>, double, float>;
  const C lr = C(hp.device.lr ? *hp.device.lr : hp.lr), mom = C(hp.momentum), damp = C(1.0 - hp.dampening);
  const C wd = C(hp.weight_decay), scale = C(hp.grad_scale);
  const bool nesterov = hp.nesterov;
  // The decay term only where weight_decay != 0, as PyTorch: 0 * an infinite parameter is NaN.
  const auto loop = [&]<bool kDecay, bool kMomentum>() {
    parallel_for(0, n, kOptimGrain, [&](int64_t b, int64_t e) {
      for_each_block(b, e, [&](int64_t bb, int64_t be) {
        sgd_chunk<P, kDecay, kMomentum, C>(p, g, buf, bb, be, lr, mom, damp, wd, scale, first, nesterov);
        write_copy(copy, p, bb, be);
      });
    });
  };
  if (wd != C(0)) buf ? loop.template operator()<true, true>() : loop.template operator()<true, false>();
  else buf ? loop.template operator()<false, true>() : loop.template operator()<false, false>();
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const CopyOut& copy,
                const kernels::SGDParams& hp) {
  if (skipped(hp.device)) return;
  const bool first = hp.device.step ? *hp.device.step == 1 : hp.first;
  float* buf = momentum_buffer.defined() ? momentum_buffer.data_ptr<float>() : nullptr;
  dispatch_floating(param.dtype(), "sgd_step", [&]<class P>() {
    sgd_loop<P>(param.data_ptr<P>(), grad.data_ptr<P>(), buf, copy, param.numel(), hp, first);
  });
}

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const kernels::AdamParams& hp) {
  adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, CopyOut{}, hp);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const kernels::SGDParams& hp) {
  sgd_update(param, grad, momentum_buffer, CopyOut{}, hp);
}

// One parameter after another: the CPU has no launches to save.
void adam_step_many(const std::vector<kernels::StepTensors>& ts, const kernels::AdamParams& hp) {
  for (const kernels::StepTensors& t : ts) {
    kernels::AdamParams h = hp;
    h.device.step = t.step.data_ptr<int64_t>();
    adam_update(t.param, t.grad, t.state[0], t.state[1], t.state[2], copy_of(t.copy), h);
  }
}

void sgd_step_many(const std::vector<kernels::StepTensors>& ts, const kernels::SGDParams& hp) {
  for (const kernels::StepTensors& t : ts) {
    kernels::SGDParams h = hp;
    h.device.step = t.step.data_ptr<int64_t>();
    sgd_update(t.param, t.grad, t.state[0], copy_of(t.copy), h);
  }
}

void advance_steps(const std::vector<Tensor>& steps, const Tensor& found_inf) {
  if (found_inf.defined() && *found_inf.data_ptr<float>() != 0.0f) return;
  for (const Tensor& s : steps) ++*s.data_ptr<int64_t>();
}

// Per-chunk f64 partials, combined in chunk order: deterministic for a given thread count.
void sum_squares(const Tensor& t, const Tensor& out) {
  *out.data_ptr<double>() = dispatch_floating(t.dtype(), "sum_squares", [&]<class T>() {
    const T* x = t.data_ptr<T>();
    const int64_t n = t.numel();
    constexpr int64_t kMaxChunks = 256;
    const int64_t chunk = std::max<int64_t>(kOptimGrain, (n + kMaxChunks - 1) / kMaxChunks);
    const int64_t chunks = (n + chunk - 1) / chunk;
    double partial[kMaxChunks] = {};
    parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        double s = 0;
        for (int64_t i = c * chunk, end = std::min(n, i + chunk); i < end; ++i) {
          double v = double(x[i]);
          s += v * v;
        }
        partial[c] = s;
      }
    });
    double total = 0;
    for (int64_t c = 0; c < chunks; ++c) total += partial[c];
    return total;
  });
}

}  // namespace mdl::cpu
