// AMP's price in accuracy: one forward and backward of a model on a batch in f32, then the same
// under autocast (f16 or bf16) from the same weights, compared. The relative error of the output
// and of each parameter's gradient (||g_amp - g_f32|| / ||g_f32||, the AMP gradient unscaled), and
// the share of the gradient values, nonzero in f32, that the 16-bit backward loses: zero, or a
// subnormal of the dtype (below its smallest normal, short of bits) before unscaling that differs
// from the f32 value. A value the dtype cannot hold came from an f32 sum (linear's weight gradient
// under amp_f32_grads) and is not counted. Each loss scale
// asked for runs its own backward, as GradScaler would scale it: at scale 1 an f16 backward shows
// what it loses without a scaler.
//
//   auto loss = [&](const Tensor& logits) { return F::cross_entropy(logits, y); };
//   amp::PrecisionReport r = amp::precision_report(*model, x, loss, kF16);
//   r.output_error, r.at_scales[0].underflow_fraction (scale 1), r.at_scales[1] (65536)
//
// The model runs in eval mode (no dropout; batch norm from its running statistics), so that both
// passes compute the same function, and nothing of it changes: its modes and any gradients it held
// are put back. dtype kF32 compares f32 with itself: every error is 0.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "nn/module.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace mdl::amp {

// The model's output -> a 0-dim loss (the caller holds the targets).
using OutputLoss = std::function<Tensor(const Tensor& output)>;

struct PrecisionOptions {
  // The loss scales to run the backward at (at least one); positive and finite.
  std::vector<double> loss_scales = {1.0, GradScalerOptions{}.init_scale};
};

// One parameter's gradient at one loss scale.
struct ParameterPrecision {
  std::string name{};
  int64_t values = 0;   // elements
  int64_t nonzero = 0;  // of them, nonzero in f32
  // ||g_amp / scale - g_f32|| / ||g_f32||; NaN when the f32 gradient is all zero.
  double error = 0;
  int64_t underflowed = 0;  // nonzero in f32; zero, or a subnormal of the dtype unequal to it, in the AMP gradient
  int64_t zeroed = 0;       // of those, exactly zero
  int64_t nonfinite = 0;    // inf or NaN in the scaled AMP gradient
};

// The backward at one loss scale.
struct ScalePrecision {
  double loss_scale = 1;
  std::vector<ParameterPrecision> parameters{};  // those that require grad, in named_parameters order
  // Over the errors of the parameters with a nonzero f32 gradient; NaN when there are none, or when
  // one of them is NaN (a NaN in that parameter's AMP gradient).
  double median_error = 0, max_error = 0;
  // Of every parameter's values nonzero in f32 (0 when there are none): underflowed, and zeroed.
  double underflow_fraction = 0, zero_fraction = 0;
  double nonfinite_fraction = 0;  // of every parameter's values
};

struct PrecisionReport {
  DType dtype = kF32;
  double output_error = 0;  // ||y_amp - y_f32|| / ||y_f32|| over the model's output; NaN when y_f32 is all zero
  double loss_error = 0;    // |l_amp - l_f32| / |l_f32|; NaN when l_f32 is 0
  std::vector<ScalePrecision> at_scales{};  // one per PrecisionOptions::loss_scales, in order
};

// The smallest positive normal value of dtype (f16: 2^-14; bf16 and f32: 2^-126); floating dtypes only.
double smallest_normal(DType dtype);

// dtype: kF16, kBF16, or kF32 (the f32 pass against itself). input on the model's device. Throws
// mdl::Error when the loss is not a single value, there is no loss scale or one is not positive and
// finite, or no parameter of the model requires grad.
PrecisionReport precision_report(nn::Module& model, const Tensor& input, const OutputLoss& loss, DType dtype,
                                 const PrecisionOptions& options = {});

}  // namespace mdl::amp
