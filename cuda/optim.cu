// Fused optimizer steps on the GPU: one pass per parameter (or one launch for up to 24 of them, the
// multi-tensor steps) updating it, its f32 state and its 16-bit copy where it has one, the same
// arithmetic as cpu/optim.cpp (f32 compute, f64 for f64 params, one rounding into the param),
// the step count and skip flag read on the device; the step counters' advance; and the sum of
// squares behind clip_grad_norm_, reduced in f64.
#include <algorithm>

#include "cuda/kernels.cuh"
#include "cuda/multi_tensor.cuh"
#include "cuda/reduce_all.cuh"

namespace mdl::cuda {

using namespace detail;

namespace {

template <class P, class C>
struct AdamConsts {
  C b1, b2, omb1, omb2, eps, scale, l2, keep, step_size, bc2_sqrt;  // omb: 1 - beta, from the double beta
  bool ams;
  double lr, beta1, beta2, weight_decay;  // for what the device's step count and lr decide
  int64_t step;
  bool decoupled;
  kernels::DeviceStepState device;
};

// Whether a device found_inf says to skip this update (every thread reads the same flag).
__device__ __forceinline__ bool skip_update(const kernels::DeviceStepState& d) {
  return d.found_inf && *d.found_inf != 0.0f;
}

// k's step-dependent constants from the device's step count (step) and lr, once per block.
template <class P, class C>
__device__ __forceinline__ void adam_device_consts(AdamConsts<P, C>& k, const int64_t* step) {
  if (!step && !k.device.lr) return;
  __shared__ C derived[3];
  if (threadIdx.x == 0) {
    const double lr = k.device.lr ? *k.device.lr : k.lr;
    const double t = double(step ? *step : k.step);
    derived[0] = C(lr) / C(1.0 - pow(k.beta1, t));  // rounded as the CPU's
    derived[1] = C(sqrt(1.0 - pow(k.beta2, t)));
    derived[2] = k.decoupled ? C(1.0 - lr * k.weight_decay) : C(1);
  }
  __syncthreads();
  k.step_size = derived[0], k.bc2_sqrt = derived[1], k.keep = derived[2];
}

// Element i of one parameter: p, g of type P; m, v, vmax (null unless amsgrad) f32.
template <class P, class C>
__device__ __forceinline__ void adam_element(int64_t i, P* p, const P* g, float* m, float* v, float* vmax,
                                             const AdamConsts<P, C>& k) {
  C pi = C(to_acc(p[i]));
  C gi = C(to_acc(g[i])) * k.scale;
  if (k.l2 != C(0)) gi += k.l2 * pi;  // only then: 0 * an infinite parameter is NaN
  pi *= k.keep;
  const C mi = k.b1 * C(m[i]) + k.omb1 * gi;
  const C vi = k.b2 * C(v[i]) + k.omb2 * gi * gi;
  m[i] = float(mi);
  v[i] = float(vi);
  C vd = vi;
  if (k.ams) {
    vd = C(vmax[i]) < vi ? vi : C(vmax[i]);  // std::max's rule, as the CPU's: a NaN vi keeps vmax
    vmax[i] = float(vd);
  }
  const C denom = sqrt(vd) / k.bc2_sqrt + k.eps;
  p[i] = convert<P>(pi - k.step_size * mi / denom);
}

template <class P, class C>
__global__ void adam_kernel(int64_t n, P* p, const P* g, float* m, float* v, float* vmax, AdamConsts<P, C> k) {
  if (skip_update(k.device)) return;
  adam_device_consts(k, k.device.step);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adam_element(i, p, g, m, v, vmax, k);
}

// Element i of one parameter: p, g of type P; buf f32 or null (no momentum).
template <class P, class C>
__device__ __forceinline__ void sgd_element(int64_t i, P* p, const P* g, float* buf, C lr, C mom, C damp, C wd, C scale,
                                            bool first, bool nesterov) {
  const C pi = C(to_acc(p[i]));
  C gi = C(to_acc(g[i])) * scale;
  if (wd != C(0)) gi += wd * pi;  // only then: 0 * an infinite parameter is NaN
  if (buf) {
    const C bi = first ? gi : mom * C(buf[i]) + damp * gi;
    buf[i] = float(bi);
    gi = nesterov ? gi + mom * bi : bi;
  }
  p[i] = convert<P>(pi - lr * gi);
}

template <class P, class C>
__global__ void sgd_kernel(int64_t n, P* p, const P* g, float* buf, C lr, C mom, C damp, C wd, C scale, bool first,
                           bool nesterov, kernels::DeviceStepState device) {
  if (skip_update(device)) return;
  if (device.step) first = *device.step == 1;
  if (device.lr) lr = C(*device.lr);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    sgd_element(i, p, g, buf, lr, mom, damp, wd, scale, first, nesterov);
}

// ---- multi-tensor steps (cuda/multi_tensor.cuh): up to kMaxTensors parameters per launch --------
struct StepPointers {
  void* p[kMaxTensors];
  const void* g[kMaxTensors];
  float* s[3][kMaxTensors];  // the f32 state, null where unused
  const int64_t* step[kMaxTensors];
  void* copy[kMaxTensors];  // the 16-bit copies, null where none
  bool copy_bf16;           // their dtype: bf16, else f16
  ChunkMap map;
};

// Element i of tensor t's copy, from the value just written to the parameter (none: nothing).
template <class P>
__device__ __forceinline__ void write_copy(const StepPointers& c, int t, int64_t i, P value) {
  if (!c.copy[t]) return;
  if (c.copy_bf16) static_cast<bf16*>(c.copy[t])[i] = convert<bf16>(value);
  else static_cast<half*>(c.copy[t])[i] = convert<half>(value);
}

template <class P, class C>
__global__ void adam_many_kernel(StepPointers c, AdamConsts<P, C> k) {
  if (skip_update(k.device)) return;
  const int b = int(blockIdx.x), t = c.map.tensor_of(b);
  adam_device_consts(k, c.step[t]);
  int64_t begin, end;
  c.map.range(b, t, begin, end);
  P* p = static_cast<P*>(c.p[t]);
  const P* g = static_cast<const P*>(c.g[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    adam_element(i, p, g, c.s[0][t], c.s[1][t], c.s[2][t], k);
    write_copy(c, t, i, p[i]);
  }
}

template <class P, class C>
__global__ void sgd_many_kernel(StepPointers c, C lr, C mom, C damp, C wd, C scale, bool nesterov,
                                kernels::DeviceStepState device) {
  if (skip_update(device)) return;
  const int b = int(blockIdx.x), t = c.map.tensor_of(b);
  const bool first = *c.step[t] == 1;
  if (device.lr) lr = C(*device.lr);
  int64_t begin, end;
  c.map.range(b, t, begin, end);
  P* p = static_cast<P*>(c.p[t]);
  const P* g = static_cast<const P*>(c.g[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    sgd_element(i, p, g, c.s[0][t], lr, mom, damp, wd, scale, first, nesterov);
    write_copy(c, t, i, p[i]);
  }
}

// Calls launch(pointers, blocks) for each launch's worth of ts (one dtype).
template <class Launch>
void for_each_step_launch(const char* op, const std::vector<kernels::StepTensors>& ts, const Launch& launch) {
  for (const kernels::StepTensors& t : ts)
    MDL_CHECK(t.param.dtype() == ts[0].param.dtype() && t.grad.dtype() == t.param.dtype(), op,
              ": one multi-tensor step takes one dtype, got ", dtype_name(t.param.dtype()), " and ",
              dtype_name(ts[0].param.dtype()));
  const kernels::StepTensors* with_copy = nullptr;
  for (const kernels::StepTensors& t : ts) {
    if (!t.copy.defined()) continue;
    if (!with_copy) with_copy = &t;
    MDL_CHECK(t.copy.dtype() == with_copy->copy.dtype() && (t.copy.dtype() == kF16 || t.copy.dtype() == kBF16), op,
              ": one multi-tensor step writes copies of one 16-bit dtype, got ", dtype_name(t.copy.dtype()), " and ",
              dtype_name(with_copy->copy.dtype()));
    MDL_CHECK(t.copy.numel() == t.param.numel() && t.copy.strides() == t.param.strides(), op, ": a copy ",
              shape_str(t.copy.shape()), " must have its parameter's shape and layout ", shape_str(t.param.shape()));
    check_on_gpu(op, t.copy, "copy");
  }
  for_each_launch(
      op, ts.size(), [&](size_t i) { return ts[i].param.numel(); },
      [&](const ChunkMap& map, const size_t* slots, int blocks) {
        StepPointers c{};
        c.map = map;
        for (int k = 0; k < map.count; ++k) {
          const kernels::StepTensors& t = ts[slots[k]];
          c.p[k] = t.param.raw_data();
          c.g[k] = t.grad.raw_data();
          for (int j = 0; j < 3; ++j)
            c.s[j][k] = t.state[size_t(j)].defined() ? ptr<float>(t.state[size_t(j)]) : nullptr;
          c.step[k] = ptr<const int64_t>(t.step);
          c.copy[k] = t.copy.defined() ? t.copy.raw_data() : nullptr;
        }
        c.copy_bf16 = with_copy && with_copy->copy.dtype() == kBF16;
        launch(c, blocks);
      });
}

// The host's part of Adam's constants (the device's step and lr replace what depends on them).
template <class P, class C>
AdamConsts<P, C> adam_consts(const kernels::AdamParams& hp) {
  AdamConsts<P, C> k;
  k.b1 = C(hp.beta1), k.b2 = C(hp.beta2), k.eps = C(hp.eps), k.scale = C(hp.grad_scale);
  k.omb1 = C(1.0 - hp.beta1), k.omb2 = C(1.0 - hp.beta2);
  k.bc2_sqrt = C(std::sqrt(1.0 - std::pow(hp.beta2, double(hp.step))));
  k.step_size = C(hp.lr) / C(1.0 - std::pow(hp.beta1, double(hp.step)));
  k.l2 = hp.decoupled ? C(0) : C(hp.weight_decay);
  k.keep = hp.decoupled ? C(1.0 - hp.lr * hp.weight_decay) : C(1);
  k.ams = hp.amsgrad;
  k.lr = hp.lr, k.beta1 = hp.beta1, k.beta2 = hp.beta2, k.weight_decay = hp.weight_decay;
  k.decoupled = hp.decoupled, k.step = hp.step;
  k.device = hp.device;
  return k;
}

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               const Tensor& max_exp_avg_sq, const kernels::AdamParams& hp) {
  const int64_t n = param.numel();
  if (n == 0) return;
  float* vmax = hp.amsgrad ? ptr<float>(max_exp_avg_sq) : nullptr;
  dispatch_floating<DeviceTypes>(param.dtype(), "adam_step", [&]<class P>() {
    using C = std::conditional_t<std::is_same_v<P, double>, double, float>;
    adam_kernel<P, C><<<blocks_for(n), kThreads, 0, stream()>>>(
        n, ptr<P>(param), ptr<const P>(grad), ptr<float>(exp_avg), ptr<float>(exp_avg_sq), vmax, adam_consts<P, C>(hp));
    CUDA_CHECK_LAUNCH("adam_step");
  });
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const kernels::SGDParams& hp) {
  const int64_t n = param.numel();
  if (n == 0) return;
  float* buf = momentum_buffer.defined() ? ptr<float>(momentum_buffer) : nullptr;
  dispatch_floating<DeviceTypes>(param.dtype(), "sgd_step", [&]<class P>() {
    using C = std::conditional_t<std::is_same_v<P, double>, double, float>;
    sgd_kernel<P, C><<<blocks_for(n), kThreads, 0, stream()>>>(
        n, ptr<P>(param), ptr<const P>(grad), buf, C(hp.lr), C(hp.momentum), C(1.0 - hp.dampening), C(hp.weight_decay),
        C(hp.grad_scale), hp.first, hp.nesterov, hp.device);
    CUDA_CHECK_LAUNCH("sgd_step");
  });
}

void adam_step_many(const std::vector<kernels::StepTensors>& ts, const kernels::AdamParams& hp) {
  if (ts.empty()) return;
  dispatch_floating<DeviceTypes>(ts[0].param.dtype(), "adam_step_many", [&]<class P>() {
    using C = std::conditional_t<std::is_same_v<P, double>, double, float>;
    const AdamConsts<P, C> k = adam_consts<P, C>(hp);
    for_each_step_launch("adam_step_many", ts, [&](const StepPointers& c, int blocks) {
      adam_many_kernel<P, C><<<unsigned(blocks), kThreads, 0, stream()>>>(c, k);
      CUDA_CHECK_LAUNCH("adam_step_many");
    });
  });
}

void sgd_step_many(const std::vector<kernels::StepTensors>& ts, const kernels::SGDParams& hp) {
  if (ts.empty()) return;
  dispatch_floating<DeviceTypes>(ts[0].param.dtype(), "sgd_step_many", [&]<class P>() {
    using C = std::conditional_t<std::is_same_v<P, double>, double, float>;
    for_each_step_launch("sgd_step_many", ts, [&](const StepPointers& c, int blocks) {
      sgd_many_kernel<P, C><<<unsigned(blocks), kThreads, 0, stream()>>>(c, C(hp.lr), C(hp.momentum),
                                                                         C(1.0 - hp.dampening), C(hp.weight_decay),
                                                                         C(hp.grad_scale), hp.nesterov, hp.device);
      CUDA_CHECK_LAUNCH("sgd_step_many");
    });
  });
}

// Up to kMaxCounters step counters per launch, their addresses passed by value (a CUDA Graph
// keeps them with the launch).
constexpr int kMaxCounters = 64;
struct Counters {
  int64_t* p[kMaxCounters];
  int n;
};
__global__ void advance_steps_kernel(Counters c, const float* found_inf) {
  if (found_inf && *found_inf != 0.0f) return;
  if (int(threadIdx.x) < c.n) *c.p[threadIdx.x] += 1;
}

void advance_steps(const std::vector<Tensor>& steps, const Tensor& found_inf) {
  const float* flag = nullptr;
  if (found_inf.defined()) {
    check_on_gpu("advance_steps", found_inf, "found_inf");
    flag = ptr<const float>(found_inf);
  }
  for (size_t b = 0; b < steps.size(); b += kMaxCounters) {
    Counters c{};
    c.n = int(std::min(steps.size() - b, size_t(kMaxCounters)));
    for (int i = 0; i < c.n; ++i) {
      const Tensor& s = steps[b + size_t(i)];
      check_on_gpu("advance_steps", s, "step");
      MDL_CHECK(s.dtype() == kI64 && s.numel() == 1, "advance_steps: a step counter must be one i64, got ",
                dtype_name(s.dtype()), " ", shape_str(s.shape()));
      c.p[i] = ptr<int64_t>(s);
    }
    advance_steps_kernel<<<1, kMaxCounters, 0, stream()>>>(c, flag);
    CUDA_CHECK_LAUNCH("advance_steps");
  }
}

void sum_squares(const Tensor& t, const Tensor& out) {
  check_on_gpu("sum_squares", out, "out");
  MDL_CHECK(out.dtype() == kF64 && out.numel() == 1, "sum_squares: out must be one f64, got ", dtype_name(out.dtype()),
            " ", shape_str(out.shape()));
  dispatch_floating<DeviceTypes>(t.dtype(), "sum_squares",
                                 [&]<class T>() { sum_of_squares<T>(ptr<const T>(t), t.numel(), ptr<double>(out)); });
}

}  // namespace mdl::cuda
