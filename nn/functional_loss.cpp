// nn::functional losses: cross_entropy as one fused node (log-softmax, NLL and label smoothing in
// one kernel each way), nll_loss and mse_loss composed from differentiable ops, and a stable
// binary_cross_entropy_with_logits node. Losses are f32 for f32/f16/bf16 inputs, f64 for f64.
#include <atomic>
#include <vector>

#include "ops/autocast.h"
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "kernels/loss.h"
#include "ops/native/native.h"
#include "ops/ops.h"

namespace mdl::nn::functional {

MDL_DIFFERENTIABLE_OPS("cross_entropy", "bce_with_logits");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

namespace {

DType loss_dtype(DType t) { return t == kF64 ? kF64 : kF32; }

Tensor as(const Tensor& x, DType t) { return x.dtype() == t ? x : native::to_dtype(x, t); }

// Class-index targets: the shape is logits' without dim 1, (N, d1, ...), or () for logits (C).
// Returns the targets as a contiguous I64 tensor, checked to be in [0, C) or ignore_index (on the
// CPU at once; on the GPU by a kernel, raised at the next sync, so no target is read on the host),
// and sets count to the number not ignored: a 0-dim tensor of the loss dtype on the targets' device.
Tensor checked_target(const char* op, const Tensor& logits, const Tensor& target, int64_t ignore_index, Tensor& count) {
  MDL_CHECK(logits.defined() && target.defined(), op, ": input and target must be defined");
  MDL_CHECK(logits.is_floating_point(), op, ": expected floating logits (f32, f16, bf16, f64), got ", logits.dtype());
  MDL_CHECK(logits.dim() >= 1, op, ": expected input of shape (C), (N, C) or (N, C, d1, ...), got a 0-dim tensor");
  MDL_CHECK(is_integral(target.dtype()) && target.dtype() != kBool, op,
            ": target must hold integer class indices (I64, I32 or U8), got ", target.dtype());
  MDL_CHECK(target.device() == logits.device(), op, ": target is on ", target.device(), " but the input is on ",
            logits.device());
  Shape expected = logits.shape();
  expected.erase(expected.begin() + (logits.dim() == 1 ? 0 : 1));
  MDL_CHECK(target.shape() == expected, op, ": target of shape ", target.shape(), " does not match the input of shape ",
            logits.shape(), " (expected a target of shape ", expected, ")");
  const int64_t C = logits.size(logits.dim() == 1 ? 0 : 1);
  Tensor t = native::contiguous(as(target, kI64));
  const DType st = loss_dtype(logits.dtype());
  if (t.device().is_cpu()) {
    const int64_t* v = t.data_ptr<int64_t>();
    int64_t kept = 0;
    for (int64_t i = 0, n = t.numel(); i < n; ++i) {
      if (v[i] == ignore_index) continue;
      MDL_CHECK(v[i] >= 0 && v[i] < C, op, ": target ", v[i], " is out of range for ", C, " classes (input of shape ",
                logits.shape(), ")");
      ++kept;
    }
    count = full({}, double(kept), TensorOptions(st, t.device()));
    return t;
  }
  kernels::check_index(t.device(), t, kernels::IndexCheck{op, "target", C, -1, true, ignore_index});
  // Counted in I64 (exact at any size), then one rounding to the loss dtype.
  Tensor kept = native::to_dtype(native::binary(BinaryOp::Ne, t, native::scalar_operand(double(ignore_index), t)),
                                 kI64);
  count = native::to_dtype(native::reduce(ReduceOp::Sum, kept, {}, false), st);
  return t;
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  MDL_CHECK(input.defined() && target.defined(), op, ": input and target must be defined");
  MDL_CHECK(input.is_floating_point() && target.is_floating_point(), op, ": input and target must be floating, got ",
            input.dtype(), " and ", target.dtype());
  MDL_CHECK(input.shape() == target.shape(), op, ": input of shape ", input.shape(), " and target of shape ",
            target.shape(), " must have the same shape");
  MDL_CHECK(input.device() == target.device(), op, ": input is on ", input.device(), " but target is on ",
            target.device());
}

// The reduction of per-element losses `el` (no autograd): itself, its sum, or its sum / count
// (a 0-dim tensor of el's dtype on its device, so that a mean needs no host value).
Tensor reduce_native(const Tensor& el, Reduction r, const Tensor& count) {
  if (r == Reduction::None) return el;
  Tensor s = native::reduce(ReduceOp::Sum, el, {}, false);
  if (r == Reduction::Sum) return s;
  return native::binary(BinaryOp::Div, s, as(count, s.dtype()));
}

// The gradient of each element of a loss, laid out as `shape`, from the gradient g of its reduction.
Tensor expand_grad(const Tensor& g, Reduction r, const Tensor& count, const Shape& shape, DType t) {
  Tensor gt = as(g, t);
  if (r == Reduction::None) return native::reshape(gt, shape);
  if (r == Reduction::Mean) gt = native::binary(BinaryOp::Div, gt, as(count, t));
  return native::expand(native::reshape(gt, {}), shape);
}

// cross_entropy composed of ops, as a framework without the fused node runs it: log_softmax, then
// nll_loss, with label smoothing's mean of -log_probs over the classes; t is the checked I64 target
// and count the number not ignored.
Tensor cross_entropy_composed(const Tensor& logits, const Tensor& t, const CrossEntropyOptions& opts,
                              const Tensor& count) {
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  const DType st = loss_dtype(logits.dtype());
  Tensor log_probs = log_softmax(to_dtype(logits, st), class_dim);
  Tensor el = nll_loss(log_probs, t, opts.ignore_index, Reduction::None);
  if (opts.label_smoothing > 0) {
    Tensor kept = native::binary(BinaryOp::Ne, t, native::scalar_operand(double(opts.ignore_index), t));
    Tensor smooth = where(kept, mean(log_probs, {class_dim}), zeros({}, TensorOptions(st, logits.device())));
    el = el * (1.0 - opts.label_smoothing) - smooth * opts.label_smoothing;
  }
  if (opts.reduction == Reduction::None) return el;
  Tensor s = sum(el);
  return opts.reduction == Reduction::Sum ? s : s / count;
}

}  // namespace


Tensor cross_entropy(const Tensor& logits_in, const Tensor& target, const CrossEntropyOptions& opts) {
  auto [logits] = amp::autocast_f32(logits_in);
  const char* op = "cross_entropy";
  Tensor count;
  Tensor t = checked_target(op, logits, target, opts.ignore_index, count);
  const double ls = opts.label_smoothing;
  MDL_CHECK(ls >= 0.0 && ls <= 1.0, "cross_entropy: label_smoothing must be in [0, 1], got ", ls);
  const bool single = logits.dim() == 1;
  const int64_t N = single ? 1 : logits.size(0), C = logits.size(single ? 0 : 1);
  int64_t D = 1;
  for (int64_t i = 2; i < logits.dim(); ++i) D *= logits.size(i);
  MDL_CHECK(C > 0, "cross_entropy: the input of shape ", logits.shape(), " has no classes");
  if (!toggles::fused_cross_entropy()) return cross_entropy_composed(logits, t, opts, count);
  const DType st = loss_dtype(logits.dtype());
  // logits (N, C, D), target (N, D) -> loss, logsum (N, D)
  Tensor xv = native::reshape(native::contiguous(logits), {N, C, D});
  Tensor tv = native::reshape(t, {N, D});
  Tensor loss = make_tensor({N, D}, st, logits.device()), logsum = make_tensor({N, D}, st, logits.device());
  if (N * D > 0) kernels::cross_entropy_forward(logits.device(), loss, logsum, xv, tv, opts.ignore_index, ls);
  Tensor out = reduce_native(native::reshape(loss, target.shape()), opts.reduction, count);
  record_fn("cross_entropy", {logits}, {out}, {xv, tv, logsum},
            [N, D, count, ls, ign = opts.ignore_index, red = opts.reduction, xs = logits.shape()](const Grads& g,
                                                                                                  const FnNode& n) {
              Tensor xv = n.saved(0);
              Tensor gl = expand_grad(g[0], red, count, {N, D}, loss_dtype(xv.dtype()));
              Tensor gx = make_tensor(xv.shape(), xv.dtype(), xv.device());
              if (N * D > 0) kernels::cross_entropy_backward(xv.device(), gx, gl, xv, n.saved(1), n.saved(2), ign, ls);
              return Grads{native::view(gx, xs)};
            });
  return out;
}

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  auto [log_probs] = amp::autocast_f32(log_probs_in);
  Tensor count;
  Tensor t = checked_target("nll_loss", log_probs, target, ignore_index, count);
  // -log_probs[n, target[n], ...] where the target is not ignored (ignored ones read class 0, weighted 0).
  Tensor valid = native::binary(BinaryOp::Ne, t, native::scalar_operand(double(ignore_index), t));
  Tensor safe = native::where(valid, t, native::scalar_like(0.0, t));
  const DType st = loss_dtype(log_probs.dtype());
  Tensor lp = log_probs.dim() == 1 ? unsqueeze(log_probs, 0) : log_probs;
  Tensor idx = native::unsqueeze(log_probs.dim() == 1 ? native::unsqueeze(safe, 0) : safe, 1);
  Tensor picked = squeeze(gather(to_dtype(lp, st), 1, idx), 1);
  if (log_probs.dim() == 1) picked = squeeze(picked, 0);
  // Selected, not multiplied by the mask: an ignored row's -inf or NaN (a masked or padding row)
  // would make 0 * inf = NaN, in the loss and, with every row ignored, in the gradient.
  Tensor el = where(valid, -picked, zeros({}, TensorOptions(st, picked.device())));
  if (reduction == Reduction::None) return el;
  Tensor s = sum(el);
  return reduction == Reduction::Sum ? s : s / count;
}

Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  auto [input, target] = amp::autocast_f32(input_in, target_in);
  check_same_shape("mse_loss", input, target);
  const DType st = loss_dtype(promote_types(input.dtype(), target.dtype()));
  Tensor d = to_dtype(input, st) - to_dtype(target, st);
  Tensor el = d * d;
  if (reduction == Reduction::None) return el;
  return reduction == Reduction::Sum ? sum(el) : mean(el);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits_in, const Tensor& target_in, Reduction reduction) {
  auto [logits, target] = amp::autocast_f32(logits_in, target_in);
  check_same_shape("binary_cross_entropy_with_logits", logits, target);
  const DType st = loss_dtype(promote_types(logits.dtype(), target.dtype()));
  const Tensor x = as(logits, st), y = as(target, st);
  // (1 - y) max(x, 0) + y max(-x, 0) + log(1 + exp(-|x|)), stable for any x: max(x, 0) - x * y
  // written with each linear term weighted, a zero weight giving 0 even against an infinite logit,
  // so x = +-inf gives inf, or 0 where the target agrees, not inf * 0 = NaN.
  using native::binary;
  using native::unary;
  const Tensor zero = native::scalar_operand(0.0, y);
  auto weighted = [&](const Tensor& w, const Tensor& r) {
    return native::masked_fill(binary(BinaryOp::Mul, w, r), binary(BinaryOp::Eq, w, zero), 0.0);
  };
  const Tensor linear = binary(
      BinaryOp::Add, weighted(binary(BinaryOp::Sub, native::scalar_operand(1.0, y), y), unary(UnaryOp::Relu, x)),
      weighted(y, unary(UnaryOp::Relu, unary(UnaryOp::Neg, x))));
  Tensor el = binary(BinaryOp::Add, linear,
                     unary(UnaryOp::Log1p, unary(UnaryOp::Exp, unary(UnaryOp::Neg, unary(UnaryOp::Abs, x)))));
  const Tensor count = native::scalar_operand(double(x.numel()), x);
  Tensor out = reduce_native(el, reduction, count);
  record_fn("bce_with_logits", {logits, target}, {out}, {x, y},
            [reduction, count, shape = x.shape()](const Grads& g, const FnNode& n) {
              Tensor x = n.saved(0), y = n.saved(1);
              Tensor ge = expand_grad(g[0], reduction, count, shape, x.dtype());
              Tensor gx, gy;
              if (n.needs(0)) gx = binary(BinaryOp::Mul, binary(BinaryOp::Sub, unary(UnaryOp::Sigmoid, x), y), ge);
              if (n.needs(1)) gy = binary(BinaryOp::Mul, unary(UnaryOp::Neg, x), ge);
              return Grads{gx, gy};
            });
  return out;
}

}  // namespace mdl::nn::functional
