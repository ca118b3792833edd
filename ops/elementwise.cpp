// Elementwise ops, forward and backward side by side. Broadcast inputs get their gradient
// summed back to their own shape (sum_to).
#include <atomic>
#include <cmath>

#include "ops/autocast.h"
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "ops/native/factory.h"
#include "kernels/gelu.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"

namespace mdl {

// The op kinds kernels/op_kinds.h marks differentiable, and the elementwise ops beyond them.
#define MDL_NAME_IF_DIFFERENTIABLE(e, name, differentiable) differentiable ? name : nullptr,
MDL_DIFFERENTIABLE_OPS(MDL_BINARY_OPS(MDL_NAME_IF_DIFFERENTIABLE) MDL_UNARY_OPS(MDL_NAME_IF_DIFFERENTIABLE) "clamp",
                       "where", "masked_fill");
#undef MDL_NAME_IF_DIFFERENTIABLE

using autograd::FnNode;
using autograd::Grads;
using autograd::record_fn;
using native::scalar_operand;
using native::sum_to;

namespace {
// g with zeros where cond holds. A 0-d CPU cond beside g on another device (a test of a scalar
// operand, such as pow's exponent) is read on the host.
Tensor zero_where(const Tensor& cond, const Tensor& g) {
  if (cond.dim() == 0 && cond.device().is_cpu() && !g.device().is_cpu()) return cond.item<bool>() ? zeros_like(g) : g;
  return native::masked_fill(g, cond, 0.0);
}

// GELU's backward composed of ops, as it ran before its fused kernel: about a dozen passes, each
// with a temporary. Exact: g (Phi(x) + x phi(x)), with Phi(x) = gelu(x) / x (1/2 at 0). Tanh form:
// g ((1 + t) / 2 + x/2 (1 - t^2) k (1 + 3c x^2)), t = tanh(k (x + c x^3)).
Tensor gelu_backward_composed(const Tensor& g, const Tensor& x, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    Tensor t = tanh((x + x * x * x * c) * k);
    Tensor dinner = (1.0 + x * x * (3.0 * c)) * k;
    return g * ((1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * dinner);
  }
  Tensor phi = exp(x * x * -0.5) * (1.0 / std::sqrt(2.0 * M_PI));
  Tensor Phi = where(eq(x, scalar_operand(0, x)), full_like(x, 0.5), native::unary(UnaryOp::Gelu, x) / x);
  return g * (Phi + x * phi);
}
}  // namespace


// ---- binary -------------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(BinaryOp::Add, a, b);
  record_fn(binary_op_name(BinaryOp::Add), {a, b}, {out}, {},
            [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode&) {
              return Grads{sum_to(g[0], sa), sum_to(g[0], sb)};
            });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(BinaryOp::Sub, a, b);
  record_fn(binary_op_name(BinaryOp::Sub), {a, b}, {out}, {},
            [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
              return Grads{sum_to(g[0], sa), n.needs(1) ? sum_to(neg(g[0]), sb) : Tensor()};
            });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(BinaryOp::Mul, a, b);
  record_fn(binary_op_name(BinaryOp::Mul), {a, b}, {out}, {a, b},
            [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
              return Grads{n.needs(0) ? sum_to(g[0] * n.saved(1), sa) : Tensor(),
                           n.needs(1) ? sum_to(g[0] * n.saved(0), sb) : Tensor()};
            });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(BinaryOp::Div, a, b);
  record_fn(binary_op_name(BinaryOp::Div), {a, b}, {out}, {a, b},
            [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
              Tensor bb = n.saved(1);
              return Grads{n.needs(0) ? sum_to(g[0] / bb, sa) : Tensor(),
                           n.needs(1) ? sum_to(neg(g[0] * n.saved(0) / (bb * bb)), sb) : Tensor()};
            });
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(BinaryOp::Pow, a, b);
  record_fn(binary_op_name(BinaryOp::Pow), {a, b}, {out}, {a, b, out},
            [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
              Tensor x = n.saved(0), e = n.saved(1), y = n.saved(2);
              Tensor ga, gb;
              // d/dx x^e = e * x^(e-1); at e == 0 the gradient is 0 (also where x == 0).
              if (n.needs(0)) ga = sum_to(zero_where(eq(e, scalar_operand(0, e)), g[0] * e * pow(x, e - 1.0)), sa);
              // d/de x^e = x^e * log x, taken as 0 where x == 0 and e >= 0, as PyTorch does.
              if (n.needs(1)) {
                Tensor mask = native::binary(BinaryOp::Eq, x, scalar_operand(0, x));
                mask = mul(mask, ge(e, scalar_operand(0, e)));
                gb = sum_to(zero_where(native::to_dtype(mask, kBool), g[0] * y * log(x)), sb);
              }
              return Grads{ga, gb};
            });
  return out;
}

Tensor pow(const Tensor& a, double e) {
  if (is_integral(a.dtype()) && a.dtype() != kBool && std::floor(e) == e && std::isfinite(e)) {
    MDL_CHECK(e >= 0, "pow: integers to negative integer powers are not allowed (got ", e, " for ", a.dtype(), ")");
    native::integer_value(e, a.dtype(), "pow");  // an exponent the dtype cannot hold is refused, not wrapped
  }
  return pow(a, scalar_operand(e, a));
}

namespace {
// maximum/minimum: the gradient goes to the chosen operand, split in half on ties.
Tensor max_min_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(op, a, b);
  record_fn(binary_op_name(op), {a, b}, {out}, {a, b},
            [op, sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
              Tensor x = n.saved(0), y = n.saved(1);
              Tensor half = where(eq(x, y), g[0] * 0.5, g[0]);
              BinaryOp lose = op == BinaryOp::Maximum ? BinaryOp::Lt : BinaryOp::Gt;  // where a loses
              Tensor ga = zero_where(native::binary(lose, x, y), half);
              Tensor gb = zero_where(native::binary(lose, y, x), half);
              return Grads{sum_to(ga, sa), sum_to(gb, sb)};
            });
  return out;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return max_min_binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return max_min_binary(BinaryOp::Minimum, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return native::binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return native::binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return native::binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return native::binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return native::binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return native::binary(BinaryOp::Ge, a, b); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double s) { return add(a, scalar_operand(s, a)); }
Tensor operator-(const Tensor& a, double s) { return sub(a, scalar_operand(s, a)); }
Tensor operator*(const Tensor& a, double s) { return mul(a, scalar_operand(s, a)); }
Tensor operator/(const Tensor& a, double s) { return div(a, native::division_operand(s, a)); }
Tensor operator+(double s, const Tensor& a) { return add(scalar_operand(s, a), a); }
Tensor operator-(double s, const Tensor& a) { return sub(scalar_operand(s, a), a); }
Tensor operator*(double s, const Tensor& a) { return mul(scalar_operand(s, a), a); }
Tensor operator/(double s, const Tensor& a) { return div(native::division_operand(s, a), a); }
Tensor operator-(const Tensor& a) { return neg(a); }

// ---- unary ----------------------------------------------------------------------------------
namespace {
// Records a unary op whose backward needs the input x and/or the output y.
template <class F>
Tensor unary_op(UnaryOp op, const Tensor& x, F grad_fn) {
  Tensor out = native::unary(op, x);
  record_fn(unary_op_name(op), {x}, {out}, {x, out},
            [grad_fn](const Grads& g, const FnNode& n) { return Grads{grad_fn(g[0], n.saved(0), n.saved(1))}; });
  return out;
}
}  // namespace

Tensor neg(const Tensor& x) {
  return unary_op(UnaryOp::Neg, x, [](const Tensor& g, const Tensor&, const Tensor&) { return neg(g); });
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::Abs, x,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return g * native::unary(UnaryOp::Sign, x); });
}
Tensor exp(const Tensor& x_in) {
  auto [x] = amp::autocast_f32(x_in);
  return unary_op(UnaryOp::Exp, x, [](const Tensor& g, const Tensor&, const Tensor& y) { return g * y; });
}
Tensor log(const Tensor& x_in) {
  auto [x] = amp::autocast_f32(x_in);
  return unary_op(UnaryOp::Log, x, [](const Tensor& g, const Tensor& x, const Tensor&) { return g / x; });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::Sqrt, x, [](const Tensor& g, const Tensor&, const Tensor& y) { return g / (y * 2.0); });
}
Tensor rsqrt(const Tensor& x) {
  return unary_op(UnaryOp::Rsqrt, x,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return g * y * y * y * -0.5; });
}
Tensor sin(const Tensor& x) {
  return unary_op(UnaryOp::Sin, x, [](const Tensor& g, const Tensor& x, const Tensor&) { return g * cos(x); });
}
Tensor cos(const Tensor& x) {
  return unary_op(UnaryOp::Cos, x, [](const Tensor& g, const Tensor& x, const Tensor&) { return neg(g * sin(x)); });
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::Tanh, x, [](const Tensor& g, const Tensor&, const Tensor& y) { return g * (1.0 - y * y); });
}
Tensor sigmoid(const Tensor& x) {
  return unary_op(UnaryOp::Sigmoid, x,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return g * y * (1.0 - y); });
}
Tensor relu(const Tensor& x) {
  return unary_op(UnaryOp::Relu, x, [](const Tensor& g, const Tensor& x, const Tensor&) {
    if (toggles::fused_relu_backward()) return native::binary(BinaryOp::ReluBackward, g, x);
    return zero_where(le(x, scalar_operand(0, x)), g);
  });
}
// The backward of relu from its output y: y > 0 exactly where relu's input was (NaN passes g in both).
Tensor relu_backward_from_output(const Tensor& g, const Tensor& y) {
  if (toggles::fused_relu_backward()) return native::binary(BinaryOp::ReluBackward, g, y);
  return zero_where(le(y, scalar_operand(0, y)), g);
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  Tensor out = native::binary(BinaryOp::AddRelu, a, b);
  record_fn(binary_op_name(BinaryOp::AddRelu), {a, b}, {out}, {out},
            [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
              const Tensor gs = relu_backward_from_output(g[0], n.saved(0));
              return Grads{sum_to(gs, sa), sum_to(gs, sb)};
            });
  return out;
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  MDL_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
            approximate, "'");
  const bool tanh_approx = approximate == "tanh";
  // The backward is one fused pass (kernels/gelu.h): Phi(x) + x phi(x), or the tanh form's derivative.
  return unary_op(tanh_approx ? UnaryOp::GeluTanh : UnaryOp::Gelu, x,
                  [tanh_approx](const Tensor& g, const Tensor& x, const Tensor&) {
                    const Tensor gg = g.dtype() == x.dtype() ? g : native::to_dtype(g, x.dtype());
                    if (!toggles::fused_gelu_backward()) return gelu_backward_composed(gg, x, tanh_approx);
                    Tensor gx = make_tensor(x.shape(), x.dtype(), x.device());
                    kernels::gelu_backward(x.device(), gx, gg, x, tanh_approx);
                    return gx;
                  });
}
Tensor silu(const Tensor& x) {
  return unary_op(UnaryOp::Silu, x, [](const Tensor& g, const Tensor& x, const Tensor&) {
    Tensor s = sigmoid(x);
    return g * s * (1.0 + x * (1.0 - s));
  });
}
Tensor square(const Tensor& x) {
  return unary_op(UnaryOp::Square, x, [](const Tensor& g, const Tensor& x, const Tensor&) { return g * x * 2.0; });
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Tensor out = native::clamp(x, lo, hi);
  record_fn("clamp", {x}, {out}, {x}, [lo, hi](const Grads& g, const FnNode& n) {
    Tensor x = n.saved(0), r = g[0];
    if (lo) r = zero_where(lt(x, scalar_operand(*lo, x)), r);
    if (hi) r = zero_where(gt(x, scalar_operand(*hi, x)), r);
    if (is_floating(x.dtype())) r = zero_where(ne(x, x), r);  // a NaN lies in no range: no gradient, as PyTorch
    return Grads{r};
  });
  return out;
}

// ---- selection ------------------------------------------------------------------------------
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = native::where(cond, a, b);
  record_fn("where", {a, b}, {out}, {cond}, [sa = a.shape(), sb = b.shape()](const Grads& g, const FnNode& n) {
    Tensor c = n.saved(0);
    Tensor not_c = eq(c, scalar_operand(0, c));
    return Grads{n.needs(0) ? sum_to(native::masked_fill(g[0], not_c, 0.0), sa) : Tensor(),
                 n.needs(1) ? sum_to(native::masked_fill(g[0], c, 0.0), sb) : Tensor()};
  });
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor out = native::masked_fill(x, mask, value);
  record_fn("masked_fill", {x}, {out}, {mask},
            [](const Grads& g, const FnNode& n) { return Grads{native::masked_fill(g[0], n.saved(0), 0.0)}; });
  return out;
}

}  // namespace mdl
