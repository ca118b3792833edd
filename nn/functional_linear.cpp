// nn::functional::linear, plain (a matmul and a bias add, one node) and with a fused activation
// (the kernels of kernels/linear_act.h, whose backward takes the activation's gradient, from the
// output for relu and from the kept pre-activation for gelu, and the bias gradient in one kernel,
// then the two GEMMs); each backward beside its forward.
#include <cmath>
#include <optional>
#include <vector>

#include "ops/autocast.h"
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "nn/functional_checks.h"
#include "nn/init.h"
#include "nn/linear_act.h"
#include "ops/native/factory.h"
#include "kernels/linear_act.h"
#include "ops/native/native.h"
#include "switches/list/toggles.h"
#include "tensor/grad_mode.h"

namespace mdl::nn {

MDL_DIFFERENTIABLE_OPS("linear", "linear_act");

namespace functional {

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;

namespace {

// The operands of a linear op under the autocast policy. The products read x, w, b (16-bit casts
// where autocast made them). With amp_f32_grads on, the casts are plain values and the node records
// the caller's tensors (inputs()): its backward then writes their f32 gradients straight from the
// GEMMs' f32 sums and the bias sum, with no to_dtype node per cast and no pass converting each
// 16-bit gradient. Off, the casts record to_dtype nodes and the node records them.
struct LinearOperands {
  Tensor x, w, b;
  std::vector<Tensor> inputs;  // the node's: {x, w, b}, or the caller's tensors
  // The dtype of the gradient the node returns for input i (an undefined bias's: x's).
  DType grad_dtype(size_t i) const { return inputs[i].defined() ? inputs[i].dtype() : x.dtype(); }
  DType dx() const { return grad_dtype(0); }
  DType dw() const { return grad_dtype(1); }
  DType db() const { return grad_dtype(2); }
};

// Gradients straight from the f32 sums (amp_f32_grads) are f32 or already the autocast dtype: an
// input of another dtype (a bf16 layer under f16 autocast) keeps its cast's node, which converts.
bool grads_through(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  if (!amp::is_autocast_enabled() || !toggles::amp_f32_grads() || !GradMode::is_enabled()) return false;
  for (const Tensor* t : {&x_in, &w_in, &b_in})
    if (t->defined() && t->dtype() != kF32 && t->dtype() != amp::autocast_dtype()) return false;
  return true;
}

LinearOperands linear_operands(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  const bool through = grads_through(x_in, w_in, b_in);
  std::optional<NoGradGuard> plain;  // casts without nodes: the op's own node carries their gradients
  if (through) plain.emplace();
  auto [x, w, b] = amp::autocast_lower(x_in, w_in, b_in);
  LinearOperands o{x, w, b, {}};
  o.inputs = through ? std::vector{x_in, w_in, b_in} : std::vector{o.x, o.w, o.b};
  return o;
}

Tensor fused_linear(const LinearOperands& ops, Activation act);

}  // namespace

// x (*, in) -> (M, in) @ w^T (in, out) + b, with M the product of the leading dims.
Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  const LinearOperands ops = linear_operands(x_in, w_in, b_in);
  const Tensor &x = ops.x, &w = ops.w, &b = ops.b;
  MDL_CHECK(x.defined() && w.defined(), "linear: undefined input or weight");
  MDL_CHECK(x.dim() >= 1, "linear: expected an input of at least 1 dim, got shape ", x.shape());
  MDL_CHECK(w.dim() == 2, "linear: expected a 2-D weight (out, in), got shape ", w.shape());
  detail::check_floating("linear", "input", x);
  detail::check_param("linear", "weight", w, x);
  const int64_t in = w.size(1), out_f = w.size(0);
  MDL_CHECK(x.size(-1) == in, "linear: input ", x.shape(), " has ", x.size(-1), " features but weight ", w.shape(),
            " expects ", in);
  detail::check_bias("linear", b, out_f, x);
  // The bias added in the GEMM's epilogue instead of in a pass of its own over the output.
  if (b.defined() && toggles::linear_bias_epilogue()) return fused_linear(ops, Activation::None);
  const Shape xs = x.shape();
  Shape os(xs.begin(), xs.end() - 1);
  const int64_t M = shape_numel(os);
  os.push_back(out_f);
  Tensor y = native::matmul(native::reshape(x, {M, in}), native::transpose(w, 0, 1));  // (M, out)
  if (b.defined() && y.numel()) kernels::binary(x.device(), BinaryOp::Add, y, y, native::expand(b, y.shape()));
  Tensor out = native::view(y, os);
  record_fn("linear", ops.inputs, {out}, {x, w},
            [xs, M, in, out_f, dx = ops.dx(), dw = ops.dw(), db = ops.db()](const Grads& g, const FnNode& n) {
              const Tensor x = n.saved(0), w = n.saved(1);
              const Tensor g2 = native::reshape(detail::as(g[0], x.dtype()), {M, out_f});  // (M, out)
              Grads r(3);
              if (n.needs(0)) r[0] = native::reshape(native::matmul(g2, w, dx), xs);
              if (n.needs(1)) r[1] = native::matmul(native::transpose(g2, 0, 1), native::reshape(x, {M, in}), dw);
              if (n.needs(2)) r[2] = native::reduce(ReduceOp::Sum, g2, {0}, false, db);
              return r;
            });
  return out;
}

namespace {

// linear_act on operands under the autocast policy: the GEMM, then the bias and the activation in
// its epilogue (cuBLASLt on the GPU, one pass over the output on the CPU).
Tensor fused_linear(const LinearOperands& ops, Activation act) {
  const Tensor &x = ops.x, &w = ops.w, &b = ops.b;
  MDL_CHECK(act == Activation::None || act == Activation::Relu || act == Activation::GeluTanh,
            "linear_act: unknown activation ", int(act), " (expected none, relu or gelu_tanh)");
  const char* op = act == Activation::None   ? "linear_act(none)"
                   : act == Activation::Relu ? "linear_act(relu)"
                                             : "linear_act(gelu_tanh)";
  MDL_CHECK(x.defined() && w.defined(), op, ": undefined input or weight");
  MDL_CHECK(x.dim() >= 1, op, ": expected an input of at least 1 dim, got shape ", x.shape());
  MDL_CHECK(w.dim() == 2, op, ": expected a 2-D weight (out, in), got shape ", w.shape());
  MDL_CHECK(x.is_floating_point(), op, ": expected a floating input (f32, f16, bf16, f64), got ", x.dtype(),
            " of shape ", x.shape());
  const int64_t in = w.size(1), out_f = w.size(0);
  MDL_CHECK(x.size(-1) == in, op, ": input ", x.shape(), " has ", x.size(-1), " features but weight ", w.shape(),
            " expects ", in);
  for (const Tensor* p : {&w, &b}) {
    if (!p->defined()) continue;
    const char* what = p == &w ? "weight" : "bias";
    MDL_CHECK(p->dtype() == x.dtype(), op, ": ", what, " ", p->shape(), " is ", p->dtype(), " but the input ",
              x.shape(), " is ", x.dtype());
    MDL_CHECK(p->device() == x.device(), op, ": ", what, " ", p->shape(), " is on ", p->device(), " but the input ",
              x.shape(), " is on ", x.device());
  }
  MDL_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == out_f), op, ": bias of shape ", b.shape(), " should be [",
            out_f, "] for weight ", w.shape());

  const Shape xs = x.shape();
  Shape os(xs.begin(), xs.end() - 1);
  const int64_t M = shape_numel(os);
  os.push_back(out_f);
  const TensorOptions to(x.dtype(), x.device());
  const Tensor x2 = native::contiguous(native::reshape(x, {M, in}));  // (M, in)
  const Tensor wc = native::contiguous(w);                            // (out, in)
  const Tensor bc = b.defined() ? native::contiguous(b) : Tensor();   // (out)
  Tensor y = empty({M, out_f}, to);                                   // (M, out)
  Tensor pre = act == Activation::GeluTanh ? empty({M, out_f}, to) : Tensor();
  if (M > 0 && out_f > 0 && in == 0) {  // an empty sum: the pre-activation is the bias (or 0)
    const Tensor v = native::expand(bc.defined() ? bc : native::scalar_like(0.0, y), {M, out_f});
    if (pre.defined()) pre.copy_(v);
    if (act == Activation::None) y.copy_(v);
    else y.copy_(native::unary(act == Activation::Relu ? UnaryOp::Relu : UnaryOp::GeluTanh, native::contiguous(v)));
  } else if (M > 0 && out_f > 0) {
    kernels::linear_act_forward(x.device(), y, pre, x2, wc, bc, act);
  }
  Tensor out = native::view(y, os);
  std::vector<Tensor> to_save{x2, wc};
  if (act != Activation::None) to_save.push_back(act == Activation::Relu ? y : pre);  // what act' is read from
  record_fn(
      "linear_act", ops.inputs, {out}, to_save,
      [xs, M, in, out_f, act, dx = ops.dx(), dw = ops.dw(), db = ops.db()](const Grads& g, const FnNode& n) {
        const Tensor x2 = n.saved(0), w = n.saved(1), s = act == Activation::None ? Tensor() : n.saved(2);
        const Tensor g2 = native::contiguous(native::reshape(detail::as(g[0], x2.dtype()), {M, out_f}));  // (M, out)
        Tensor gp = g2, gb;
        if (n.needs(2)) gb = empty({out_f}, TensorOptions(db, g2.device()));
        if (act != Activation::None || gb.defined()) {
          if (act != Activation::None) gp = empty({M, out_f}, TensorOptions(g2.dtype(), g2.device()));
          if (M > 0 && out_f > 0) kernels::linear_act_backward(g2.device(), gp, gb, g2, s, act);
          else if (gb.defined()) gb.fill_(0.0);
        }
        Grads r(3);
        if (n.needs(0)) r[0] = native::reshape(native::matmul(gp, w, dx), xs);
        if (n.needs(1)) r[1] = native::matmul(native::transpose(gp, 0, 1), x2, dw);
        r[2] = gb;
        return r;
      });
  return out;
}

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, Activation act) {
  return fused_linear(linear_operands(x_in, w_in, b_in), act);
}

}  // namespace functional

LinearAct::LinearAct(int64_t in, int64_t out, Activation act, bool with_bias)
    : Module("LinearAct"), in_features(in), out_features(out), activation(act) {
  MDL_CHECK(in > 0 && out > 0, "LinearAct: in_features and out_features must be positive, got ", in, " and ", out);
  weight = register_parameter("weight", empty({out, in}));
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias) {
    bias = register_parameter("bias", empty({out}));
    const double bound = 1.0 / std::sqrt(double(in));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearAct::forward(const Tensor& x) { return functional::linear(x, weight, bias, activation); }

std::string LinearAct::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false") + ", activation=" + activation_name(activation);
}

}  // namespace mdl::nn
