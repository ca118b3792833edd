// FLOP counts per kernel (a multiply-add counts as two), in the argument order of the kernel
// contract (kernels/*.h). Bias adds and softmax exponentials inside attention are left out, as
// torch does; an elementwise op counts one operation per output element (exp and tanh cost more:
// a lower bound), a reduction one per element reduced, var three (difference, square, sum) and
// softmax one per element per arithmetic step (5 forward, 4 backward). Bytes count a broadcast
// (stride 0) dimension once.
#include "profiler/cost.h"

#include <algorithm>
#include <cstring>

#include "tensor/tensor.h"

namespace mdl::profiler::detail {

namespace {

const Tensor* arg(const KernelArg* args, int count, int i) {
  return i < count && args[i].tensor && args[i].tensor->defined() ? args[i].tensor : nullptr;
}
int64_t value(const KernelArg* args, int count, int i) { return i < count ? args[i].value : 0; }

int64_t last_dim(const Tensor& t, int from_end) { return t.size(t.dim() - from_end); }

// out (B, M, N) = a (B, M, K) @ b (B, K, N).
int64_t matmul_flops(const KernelArg* t, int n) {
  const Tensor *out = arg(t, n, 0), *a = arg(t, n, 1);
  if (!out || !a || a->dim() < 2) return -1;
  return 2 * out->numel() * last_dim(*a, 1);
}

// out (M, N) = act(x (M, K) @ w^T + bias), pre, x, w: the GEMM of the fused linear layer.
int64_t linear_act_flops(const KernelArg* t, int n) {
  const Tensor *out = arg(t, n, 0), *x = arg(t, n, 2);
  if (!out || !x || x->dim() < 2) return -1;
  return 2 * out->numel() * last_dim(*x, 1);
}

// Each output element of a conv sums Cin/groups * kH * kW products.
int64_t conv_flops_per_output(const Tensor& w) { return w.dim() == 4 ? 2 * w.size(1) * w.size(2) * w.size(3) : -1; }

// out (N, Cout, Ho, Wo), x, w (Cout, Cin/groups, kH, kW), b.
int64_t conv2d_flops(const KernelArg* t, int n) {
  const Tensor *out = arg(t, n, 0), *w = arg(t, n, 2);
  if (!out || !w || conv_flops_per_output(*w) < 0) return -1;
  return out->numel() * conv_flops_per_output(*w);
}

// grad_x, grad_w, grad_b, grad_out, x, w: each of grad_x and grad_w costs one forward.
int64_t conv2d_backward_flops(const KernelArg* t, int n) {
  const Tensor *grad_out = arg(t, n, 3), *w = arg(t, n, 5);
  if (!grad_out || !w || conv_flops_per_output(*w) < 0) return -1;
  int64_t passes = (arg(t, n, 0) ? 1 : 0) + (arg(t, n, 1) ? 1 : 0);
  return passes * grad_out->numel() * conv_flops_per_output(*w);
}

// q (*, L, E), k (*, S, E), v (*, S, Ev) at argument positions qi, qi+1, qi+2, the causal flag at ci:
// returns the (query, key) pairs scored, B * L * S (causal: B * the sum over i < L of min(S, i + 1)),
// and sets E, Ev.
bool attention_dims(const KernelArg* t, int n, int qi, int ci, int64_t& pairs, int64_t& e, int64_t& ev) {
  const Tensor *q = arg(t, n, qi), *k = arg(t, n, qi + 1), *v = arg(t, n, qi + 2);
  if (!q || !k || !v || q->dim() < 2 || k->dim() < 2 || v->dim() < 2) return false;
  e = last_dim(*q, 1);
  ev = last_dim(*v, 1);
  const int64_t L = last_dim(*q, 2), S = last_dim(*k, 2);
  const int64_t batch = L && e ? q->numel() / (L * e) : 0;
  int64_t per_batch = L * S;
  if (value(t, n, ci)) {
    const int64_t ramp = std::min(L, S);  // rows 0..ramp-1 see i + 1 keys, the rest all S
    per_batch = ramp * (ramp + 1) / 2 + (L - ramp) * S;
  }
  pairs = batch * per_batch;
  return true;
}

// Forward: scores q k^T and out = p v.
int64_t attention_flops(const KernelArg* t, int n) {
  int64_t pairs, e, ev;
  return attention_dims(t, n, 2, 6, pairs, e, ev) ? 2 * pairs * (e + ev) : -1;
}

// Backward: recomputed scores (E), dv = p^T dO (Ev), dp = dO v^T (Ev), dq = ds k (E), dk = ds^T q (E).
int64_t attention_backward_flops(const KernelArg* t, int n) {
  int64_t pairs, e, ev;
  return attention_dims(t, n, 4, 10, pairs, e, ev) ? 2 * pairs * (3 * e + 2 * ev) : -1;
}

// unary and binary: (op, out, inputs...); reduce: (op, out, in, mask); where: (out, cond, a, b).
int64_t per_element(const Tensor* t, int64_t ops) { return t ? ops * t->numel() : -1; }
int64_t elementwise_flops(const KernelArg* t, int n) { return per_element(arg(t, n, 1), 1); }
int64_t reduce_flops(const KernelArg* t, int n) { return per_element(arg(t, n, 2), 1); }

}  // namespace

int64_t tensor_bytes(const Tensor& t) {
  if (!t.defined()) return 0;
  int64_t n = 1;  // the elements t's memory holds for its view
  for (int64_t d = 0; d < t.dim(); ++d) n *= t.stride(d) == 0 && t.size(d) > 0 ? 1 : t.size(d);
  return n * int64_t(dtype_size(t.dtype()));
}

int64_t kernel_flops(const char* name, const KernelArg* args, int count) {
  auto is = [name](const char* n) { return std::strcmp(name, n) == 0; };
  if (is("unary") || is("binary")) return elementwise_flops(args, count);
  if (is("reduce")) return reduce_flops(args, count);
  if (is("where")) return per_element(arg(args, count, 0), 1);
  if (is("max/min")) return per_element(arg(args, count, 3), 1);
  if (is("var")) return per_element(arg(args, count, 1), 3);
  if (is("softmax")) return per_element(arg(args, count, 1), 5);
  if (is("softmax_backward")) return per_element(arg(args, count, 2), 4);
  if (is("matmul")) return matmul_flops(args, count);
  if (is("linear_act")) return linear_act_flops(args, count);
  if (is("conv2d")) return conv2d_flops(args, count);
  if (is("conv2d_backward")) return conv2d_backward_flops(args, count);
  if (is("scaled_dot_product_attention")) return attention_flops(args, count);
  if (is("scaled_dot_product_attention_backward")) return attention_backward_flops(args, count);
  return -1;
}

namespace {

// Whether argument i of kernel `name` is updated in place (read and written): an optimizer step's
// parameter and state (adam_step: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq; sgd_step: param,
// grad, momentum_buffer; all but the gradient) and GradScaler's gradients (kernels/amp.h). The
// multi-tensor steps count their own (kernels/optim.h).
bool updated_in_place(const char* name, int i) {
  auto is = [name](const char* n) { return std::strcmp(name, n) == 0; };
  if (is("adam_step") || is("sgd_step")) return i != 1;
  if (is("amp_unscale_check") || is("amp_unscale_check_many")) return i == 0;
  return false;
}

}  // namespace

int64_t kernel_bytes(const char* name, const KernelArg* args, int count) {
  int64_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    const int64_t b = (args[i].tensor ? tensor_bytes(*args[i].tensor) : 0) + args[i].list_bytes;
    bytes += updated_in_place(name, i) ? 2 * b : b;
  }
  return bytes;
}

const Tensor* compute_operand(const char* name, const KernelArg* args, int count) {
  auto is = [name](const char* n) { return std::strcmp(name, n) == 0; };
  int operand = -1;  // the first input of a product, by the contract's argument order
  if (is("matmul") || is("conv2d")) operand = 1;
  else if (is("linear_act") || is("scaled_dot_product_attention")) operand = 2;
  else if (is("conv2d_backward")) operand = 3;
  else if (is("scaled_dot_product_attention_backward")) operand = 4;
  if (const Tensor* t = operand >= 0 ? arg(args, count, operand) : nullptr) return t;
  for (int i = 0; i < count; ++i)
    if (const Tensor* t = arg(args, count, i)) return t;
  return nullptr;
}

}  // namespace mdl::profiler::detail
