// Argument checks and small helpers shared by nn::functional's linear, conv and pooling ops.
#pragma once
#include <string>

#include "nn/functional.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl::nn::functional::detail {

inline Shape pair(Pair p) { return {p[0], p[1]}; }
inline std::string hw(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }
inline Tensor as(const Tensor& x, DType t) { return !x.defined() || x.dtype() == t ? x : native::to_dtype(x, t); }

inline void check_floating(const char* op, const char* what, const Tensor& t) {
  MDL_CHECK(t.is_floating_point(), op, ": expected a floating ", what, " (f32, f16, bf16, f64), got ", t.dtype(),
            " of shape ", t.shape());
}

// Checks a parameter (weight or bias) against the input x: same dtype and device.
inline void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x) {
  MDL_CHECK(p.dtype() == x.dtype(), op, ": ", what, " ", p.shape(), " is ", p.dtype(), " but the input ", x.shape(),
            " is ", x.dtype());
  MDL_CHECK(p.device() == x.device(), op, ": ", what, " ", p.shape(), " is on ", p.device(), " but the input ",
            x.shape(), " is on ", x.device());
}

inline void check_bias(const char* op, const Tensor& b, int64_t n, const Tensor& x) {
  if (!b.defined()) return;
  MDL_CHECK(b.dim() == 1 && b.size(0) == n, op, ": bias of shape ", b.shape(), " should be [", n, "]");
  check_param(op, "bias", b, x);
}

// Calls f on x as (N, C, H, W): a 3-D (C, H, W) input runs as a batch of one.
template <class F>
Tensor batched_4d(const char* op, const Tensor& x, const F& f) {
  MDL_CHECK(x.defined(), op, ": the input is undefined");
  MDL_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
            x.shape());
  if (x.dim() == 3) return squeeze(f(unsqueeze(x, 0)), 0);
  return f(x);
}

// The storage dtype a conv kernel runs on: f64 stays f64; f16/bf16 stay as they are on CUDA (cuDNN
// computes in f32 on tensor cores), and bf16 on the CPU (its kernels read bf16, sum in f32 and
// round once); f16 runs in f32 on the CPU.
inline DType conv_dtype(DType t, Device d) { return t == kF64 || t == kBF16 || d.is_cuda() ? t : kF32; }

}  // namespace mdl::nn::functional::detail
