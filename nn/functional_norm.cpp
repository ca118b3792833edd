// nn::functional normalisations, dropout and embedding: argument checks, then the fused kernels
// of kernels/norm.h with each backward recorded right beside its forward. batch_norm also
// updates the running statistics in place, outside autograd.
#include <atomic>
#include <cmath>
#include <utility>

#include "ops/autocast.h"
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "tensor/grad_mode.h"
#include "cuda/api.h"
#include "nn/functional.h"
#include "switches/list/toggles.h"
#include "ops/ops.h"
#include "kernels/norm.h"
#include "kernels/dropout.h"
#include "ops/native/native.h"

namespace mdl::nn::functional {

MDL_DIFFERENTIABLE_OPS("batch_norm", "batch_norm_relu", "batch_norm_add_relu", "layer_norm", "group_norm", "dropout",
                       "embedding");

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

namespace {

// layer_norm composed of ops over the last k dims, in x's dtype, as a framework without the fused
// kernels runs it: each line a pass and a temporary, autograd differentiating every op.
Tensor layer_norm_composed(const Tensor& x, int64_t k, const Tensor& weight, const Tensor& bias, double eps) {
  std::vector<int64_t> dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Tensor centered = x - mean(x, dims, true);
  Tensor y = centered * rsqrt(mean(centered * centered, dims, true) + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

// Means, inverse stds, parameters and their gradients: f64 for f64 inputs, f32 otherwise.
DType stat_dtype(DType t) { return t == kF64 ? kF64 : kF32; }

Tensor as(const Tensor& x, DType t) { return x.dtype() == t ? x : native::to_dtype(x, t); }

void check_input(const char* op, const Tensor& x) {
  MDL_CHECK(x.defined(), op, ": the input is undefined");
  MDL_CHECK(x.is_floating_point(), op, ": expected a floating input (f32, f16, bf16, f64), got ", x.dtype());
}

// A per-channel tensor (weight, bias, running stat) of `shape`, as a contiguous stat-dtype tensor
// of `numel` elements; undefined stays undefined.
Tensor param(const char* op, const char* what, const Tensor& p, const Shape& shape, const Tensor& x) {
  if (!p.defined()) return p;
  MDL_CHECK(p.is_floating_point(), op, ": ", what, " must be floating, got ", p.dtype());
  MDL_CHECK(p.device() == x.device(), op, ": ", what, " is on ", p.device(), " but the input is on ", x.device());
  MDL_CHECK(p.shape() == shape, op, ": ", what, " of shape ", p.shape(), " does not match the expected ", shape,
            " for the input of shape ", x.shape());
  return native::contiguous(native::reshape(as(p, stat_dtype(x.dtype())), {shape_numel(shape)}));
}

// The gradient arriving at an output, contiguous in the input's dtype and viewed as `shape`.
Tensor grad_as(const Tensor& g, DType t, const Shape& shape) {
  return native::reshape(native::contiguous(as(g, t)), shape);
}

// A channels-last (N, C, H, W) tensor's memory is (N*H*W, C) rows, so batch norm's per-channel
// statistics over (N*H*W, C, 1) are those over (N, C, H*W), read in place with no transpose.
Tensor rows_of_channels(const Tensor& x) {
  const Tensor c = native::contiguous(x, MemoryFormat::ChannelsLast);
  const int64_t C = c.size(1);
  return make_view(c, {c.numel() / C, C, 1}, {C, 1, 1}, c.offset());
}
Tensor from_rows_of_channels(const Tensor& t, const Shape& shape4) {
  return make_view(t, shape4, strides_for(shape4, MemoryFormat::ChannelsLast), t.offset());
}

Tensor maybe(bool needed, const Shape& shape, DType t, Device d) {
  return needed ? make_tensor(shape, t, d) : Tensor();
}

// The saved tensors of a norm node: x, mean, rstd, then weight when given.
std::vector<Tensor> saved_list(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w) {
  std::vector<Tensor> s{x, mean, rstd};
  if (w.defined()) s.push_back(w);
  return s;
}

// eps keeps 1/sqrt(var + eps) finite: a negative or non-finite one gives NaN or 0 outputs.
void check_eps(const char* op, double eps) {
  MDL_CHECK(std::isfinite(eps) && eps >= 0, op, ": eps must be finite and >= 0, got ", eps);
}

// Shared by layer_norm and group_norm: x (N, C, S), statistics per (n, group).
Tensor group_norm_op(const char* name, const Tensor& x, const Shape& shape3, int64_t groups, const Tensor& weight,
                     const Tensor& bias, const Tensor& w, const Tensor& b, double eps) {
  check_eps(name, eps);
  const Tensor xv = native::reshape(native::contiguous(x), shape3);
  const DType st = stat_dtype(x.dtype());
  Tensor out = make_tensor(shape3, x.dtype(), x.device());
  Tensor mean = make_tensor({shape3[0] * groups}, st, x.device()),
         rstd = make_tensor({shape3[0] * groups}, st, x.device());
  kernels::group_norm_forward(x.device(), out, mean, rstd, xv, w, b, groups, eps);
  Tensor y = native::view(out, x.shape());
  const bool has_w = w.defined();
  const Shape ws = weight.defined() ? weight.shape() : Shape{}, bs = bias.defined() ? bias.shape() : Shape{};
  record_fn(name, {x, weight, bias}, {y}, saved_list(xv, mean, rstd, w),
            [shape3, groups, has_w, xs = x.shape(), ws, bs](const Grads& g, const FnNode& n) {
              Tensor xv = n.saved(0), w = has_w ? n.saved(3) : Tensor();
              const DType st = stat_dtype(xv.dtype());
              const int64_t C = shape3[1];
              Tensor gx = maybe(n.needs(0), shape3, xv.dtype(), xv.device());
              Tensor gw = maybe(n.needs(1), {C}, st, xv.device()), gb = maybe(n.needs(2), {C}, st, xv.device());
              kernels::group_norm_backward(xv.device(), gx, gw, gb, grad_as(g[0], xv.dtype(), shape3), xv, n.saved(1),
                                           n.saved(2), w, groups);
              return Grads{gx.defined() ? native::view(gx, xs) : gx, gw.defined() ? native::view(gw, ws) : gw,
                           gb.defined() ? native::view(gb, bs) : gb};
            });
  return y;
}

// The backward of relu(batch_norm(x) + residual): the ReLU's mask from the output y (y > 0 exactly
// where the sum was, NaN passing in both), which is both the residual's gradient and the gradient
// batch norm's backward takes: add_relu's backward then batch norm's, so the fold saves passes in
// the forward only.
Tensor record_add_relu(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& residual, const Tensor& y, const Tensor& xv, const Tensor& mean,
                       const Tensor& invstd, const Tensor& w, bool training) {
  const Shape shape3 = xv.shape();
  const bool has_w = w.defined(), nhwc = x.memory_format() == MemoryFormat::ChannelsLast;
  std::vector<Tensor> saved = saved_list(xv, mean, invstd, w);
  saved.push_back(y);
  record_fn(op, {x, weight, bias, residual}, {y}, std::move(saved),
            [shape3, training, has_w, nhwc, xs = x.shape()](const Grads& g, const FnNode& n) {
              Tensor xv = n.saved(0), w = has_w ? n.saved(3) : Tensor(), y = n.saved(has_w ? 4 : 3);
              const DType st = stat_dtype(xv.dtype());
              const int64_t C = shape3[1];
              const Tensor gs = native::binary(BinaryOp::ReluBackward, as(g[0], xv.dtype()), y);
              Tensor gx = maybe(n.needs(0), shape3, xv.dtype(), xv.device());
              Tensor gw = maybe(n.needs(1), {C}, st, xv.device()), gb = maybe(n.needs(2), {C}, st, xv.device());
              const Tensor gy = nhwc ? rows_of_channels(gs) : grad_as(gs, xv.dtype(), shape3);
              kernels::batch_norm_backward(xv.device(), gx, gw, gb, gy, xv, n.saved(1), n.saved(2), w, Tensor(),
                                           training, false);
              if (gx.defined()) gx = nhwc ? from_rows_of_channels(gx, xs) : native::view(gx, xs);
              return Grads{gx, gw, gb, n.needs(3) ? gs : Tensor()};
            });
  return y;
}

// Batch norm, with the ReLU folded into both passes when relu: the forward writes relu(v), and the
// backward gates the incoming gradient by v's sign, recomputed from the saved x (kernels/norm.h), so
// neither v nor a mask is stored. Runs in its input's dtype with statistics and parameters in f32,
// under autocast too (as PyTorch's autocast does): a 16-bit activation stays 16-bit into the next
// conv, with no casts either side.
Tensor batch_norm_op(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps, bool relu,
                     const Tensor& residual = Tensor()) {
  check_input(op, x);
  MDL_CHECK(x.dim() >= 2, op, ": expected an input of shape (N, C) or (N, C, ...), got ", x.shape());
  MDL_CHECK(running_mean.defined() == running_var.defined(), op,
            ": running_mean and running_var must both be given or both be undefined");
  MDL_CHECK(training || running_mean.defined(), op, ": running_mean and running_var are required in eval mode");
  check_eps(op, eps);
  MDL_CHECK(std::isfinite(momentum) && momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ",
            momentum);
  const int64_t N = x.size(0), C = x.size(1);
  int64_t S = 1;
  for (int64_t i = 2; i < x.dim(); ++i) S *= x.size(i);
  const bool nhwc = x.memory_format() == MemoryFormat::ChannelsLast;
  const Shape shape3 = nhwc ? Shape{N * S, C, 1} : Shape{N, C, S};
  Tensor w = param(op, "weight", weight, {C}, x), b = param(op, "bias", bias, {C}, x);
  Tensor rm = param(op, "running_mean", running_mean, {C}, x), rv = param(op, "running_var", running_var, {C}, x);
  MDL_CHECK(!training || N * S > 1, op, ": expected more than 1 value per channel when training, got input of shape ",
            x.shape());
  const DType st = stat_dtype(x.dtype());
  const Tensor xv = nhwc ? rows_of_channels(x) : native::reshape(native::contiguous(x), shape3);
  Tensor res3;  // the residual in x's layout, (N, C, S) as xv
  if (residual.defined()) {
    MDL_CHECK(residual.shape() == x.shape() && residual.dtype() == x.dtype() && residual.device() == x.device(), op,
              ": the residual must match the input (shape ", x.shape(), ", ", x.dtype(), " on ", x.device(),
              "), got shape ", residual.shape(), ", ", residual.dtype(), " on ", residual.device());
    res3 = nhwc ? rows_of_channels(residual) : native::reshape(native::contiguous(residual), shape3);
  }
  Tensor out = make_tensor(shape3, x.dtype(), x.device());
  Tensor mean, var, invstd;
  if (training) {
    mean = make_tensor({C}, st, x.device());
    var = make_tensor({C}, st, x.device());
    invstd = make_tensor({C}, st, x.device());
  } else {
    mean = native::clone(rm);  // saved for backward: later running-stat updates must not touch it
    invstd = native::unary(UnaryOp::Rsqrt, native::binary(BinaryOp::Add, rv, native::scalar_operand(eps, rv)));
  }
  // A training batch also blends its statistics into rm and rv, the running tensors themselves
  // unless param() had to cast or gather them: then the blend is copied back.
  const bool update = training && running_mean.defined();
  kernels::batch_norm_forward(x.device(), out, mean, var, invstd, xv, w, b, res3, update ? rm : Tensor(),
                              update ? rv : Tensor(), training, momentum, eps, relu);
  if (update) {
    NoGradGuard no_grad;
    for (auto [updated, running] : {std::pair{rm, running_mean}, std::pair{rv, running_var}}) {
      if (updated.raw_data() != running.raw_data()) Tensor(running).copy_(updated);
      else running.bump_version();  // written in place, as copy_ would have
    }
  }
  Tensor y = nhwc ? from_rows_of_channels(out, x.shape()) : native::view(out, x.shape());
  if (residual.defined()) return record_add_relu(op, x, weight, bias, residual, y, xv, mean, invstd, w, training);
  const bool has_w = w.defined(), keep_b = relu && b.defined();  // the mask needs the bias
  std::vector<Tensor> saved = saved_list(xv, mean, invstd, w);
  if (keep_b) saved.push_back(b);
  record_fn(op, {x, weight, bias}, {y}, std::move(saved),
            [shape3, training, has_w, keep_b, relu, nhwc, xs = x.shape()](const Grads& g, const FnNode& n) {
              Tensor xv = n.saved(0), w = has_w ? n.saved(3) : Tensor();
              Tensor b = keep_b ? n.saved(has_w ? 4 : 3) : Tensor();
              const DType st = stat_dtype(xv.dtype());
              const int64_t C = shape3[1];
              Tensor gx = maybe(n.needs(0), shape3, xv.dtype(), xv.device());
              Tensor gw = maybe(n.needs(1), {C}, st, xv.device()), gb = maybe(n.needs(2), {C}, st, xv.device());
              const Tensor gy = nhwc ? rows_of_channels(as(g[0], xv.dtype())) : grad_as(g[0], xv.dtype(), shape3);
              kernels::batch_norm_backward(xv.device(), gx, gw, gb, gy, xv, n.saved(1), n.saved(2), w, b, training,
                                           relu);
              if (!gx.defined()) return Grads{gx, gw, gb};
              return Grads{nhwc ? from_rows_of_channels(gx, xs) : native::view(gx, xs), gw, gb};
            });
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_op("batch_norm", x, running_mean, running_var, weight, bias, training, momentum, eps, false);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_op("batch_norm_relu", x, running_mean, running_var, weight, bias, training, momentum, eps, true);
}

Tensor batch_norm_add_relu(const Tensor& x, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                           double momentum, double eps) {
  MDL_CHECK(residual.defined(), "batch_norm_add_relu: the residual is undefined");
  return batch_norm_op("batch_norm_add_relu", x, running_mean, running_var, weight, bias, training, momentum, eps, true,
                       residual);
}


Tensor layer_norm(const Tensor& x_in, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  auto [x] = amp::autocast_f32(x_in);
  const char* op = "layer_norm";
  check_input(op, x);
  const int64_t k = int64_t(normalized_shape.size());
  MDL_CHECK(k >= 1, "layer_norm: normalized_shape must have at least one dim");
  bool match = k <= x.dim();
  for (int64_t i = 0; match && i < k; ++i) match = x.size(x.dim() - k + i) == normalized_shape[size_t(i)];
  MDL_CHECK(match, "layer_norm: normalized_shape ", normalized_shape,
            " does not match the trailing dims of the input of shape ", x.shape());
  const int64_t F = shape_numel(normalized_shape);
  int64_t M = 1;
  for (int64_t i = 0; i < x.dim() - k; ++i) M *= x.size(i);
  Tensor w = param(op, "weight", weight, normalized_shape, x), b = param(op, "bias", bias, normalized_shape, x);
  if (!toggles::fused_layer_norm()) return layer_norm_composed(x, k, weight, bias, eps);
  return group_norm_op("layer_norm", x, {M, F, 1}, 1, weight, bias, w, b, eps);
}

Tensor group_norm(const Tensor& x_in, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  auto [x] = amp::autocast_f32(x_in);
  const char* op = "group_norm";
  check_input(op, x);
  MDL_CHECK(x.dim() >= 2, "group_norm: expected an input of shape (N, C, ...), got ", x.shape());
  const int64_t N = x.size(0), C = x.size(1);
  MDL_CHECK(num_groups > 0 && C % num_groups == 0, "group_norm: ", C, " channels (input of shape ", x.shape(),
            ") cannot be split into ", num_groups, " groups");
  int64_t S = 1;
  for (int64_t i = 2; i < x.dim(); ++i) S *= x.size(i);
  Tensor w = param(op, "weight", weight, {C}, x), b = param(op, "bias", bias, {C}, x);
  return group_norm_op("group_norm", x, {N, C, S}, num_groups, weight, bias, w, b, eps);
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_input("dropout", x);
  MDL_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  MDL_CHECK(!x.device().is_cuda() || !cuda::is_capturing(),
            "dropout: cannot be captured in a CUDA Graph: every replay would drop the units its capture drew; ",
            "set the dropout to 0 or run the step eagerly");
  Generator& g = gen ? *gen : default_generator();
  const uint64_t seed = g.seed(), offset = g.advance((uint64_t(x.numel()) + 3) / 4);
  Tensor mask = make_tensor(x.shape(), kBool, x.device());
  if (x.numel()) kernels::dropout_mask(x.device(), mask, p, seed, offset);
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  kernels::masked_scale(x.device(), out, x, mask, scale);
  record_fn("dropout", {x}, {out}, {mask}, [scale](const Grads& g, const FnNode& n) {
    Tensor mask = n.saved(0);
    Tensor gx = make_tensor(mask.shape(), g[0].dtype(), g[0].device());
    kernels::masked_scale(gx.device(), gx, g[0], mask, scale);
    return Grads{gx};
  });
  return out;
}

Tensor embedding(const Tensor& index, const Tensor& weight) {
  MDL_CHECK(index.defined() && weight.defined(), "embedding: index and weight must be defined");
  MDL_CHECK(weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape ",
            weight.shape());
  MDL_CHECK(is_integral(index.dtype()) && index.dtype() != kBool,
            "embedding: index must be an integer tensor (I64, I32 or U8), got ", index.dtype());
  MDL_CHECK(index.device() == weight.device(), "embedding: index is on ", index.device(), " but weight is on ",
            weight.device());
  const int64_t V = weight.size(0), D = weight.size(1), n = index.numel();
  Tensor flat = native::contiguous(native::reshape(as(index, kI64), {n}));
  if (flat.device().is_cpu()) {
    const int64_t* v = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
      MDL_CHECK(v[i] >= 0 && v[i] < V, "embedding: index ", v[i], " is out of range for a weight of shape ",
                weight.shape(), " (", V, " embeddings)");
  } else {  // on the device: raised at the next sync, no host read of the indices
    kernels::check_index(flat.device(), flat, kernels::IndexCheck{"embedding", "index", V, 0});
  }
  Shape out_shape = index.shape();
  out_shape.push_back(D);
  Tensor y = native::view(native::index_select(weight, 0, flat), out_shape);
  record_fn("embedding", {weight}, {y}, {flat}, [V, D, n](const Grads& g, const FnNode& node) {
    Tensor zero = make_tensor({V, D}, g[0].dtype(), g[0].device());
    native::fill_(zero, 0.0);
    return Grads{native::index_add(zero, 0, node.saved(0), native::reshape(g[0], {n, D}))};
  });
  return y;
}

}  // namespace mdl::nn::functional
