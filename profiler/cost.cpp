// FLOP counts per kernel (a multiply-add counts as two), in the argument order of the kernel
// contract (kernels/*.h). Bias adds and softmax exponentials are left out, as torch does; an
// elementwise op counts one operation per output element (exp and tanh cost more: a lower bound),
// a reduction one per element reduced. Bytes count a broadcast (stride 0) dimension once.
#include "profiler/cost.h"

#include <cstring>

#include "tensor/tensor.h"

namespace mdl::profiler::detail {

namespace {

const Tensor* arg(const Tensor* const* tensors, int count, int i) {
  return i < count && tensors[i] && tensors[i]->defined() ? tensors[i] : nullptr;
}

int64_t last_dim(const Tensor& t, int from_end) { return t.size(t.dim() - from_end); }

// out (B, M, N) = a (B, M, K) @ b (B, K, N).
int64_t matmul_flops(const Tensor* const* t, int n) {
  const Tensor *out = arg(t, n, 0), *a = arg(t, n, 1);
  if (!out || !a || a->dim() < 2) return -1;
  return 2 * out->numel() * last_dim(*a, 1);
}

// out (M, N) = act(x (M, K) @ w^T + bias), pre, x, w: the GEMM of the fused linear layer.
int64_t linear_act_flops(const Tensor* const* t, int n) {
  const Tensor *out = arg(t, n, 0), *x = arg(t, n, 2);
  if (!out || !x || x->dim() < 2) return -1;
  return 2 * out->numel() * last_dim(*x, 1);
}

// Each output element of a conv sums Cin/groups * kH * kW products.
int64_t conv_flops_per_output(const Tensor& w) { return w.dim() == 4 ? 2 * w.size(1) * w.size(2) * w.size(3) : -1; }

// out (N, Cout, Ho, Wo), x, w (Cout, Cin/groups, kH, kW), b.
int64_t conv2d_flops(const Tensor* const* t, int n) {
  const Tensor *out = arg(t, n, 0), *w = arg(t, n, 2);
  if (!out || !w || conv_flops_per_output(*w) < 0) return -1;
  return out->numel() * conv_flops_per_output(*w);
}

// grad_x, grad_w, grad_b, grad_out, x, w: each of grad_x and grad_w costs one forward.
int64_t conv2d_backward_flops(const Tensor* const* t, int n) {
  const Tensor *grad_out = arg(t, n, 3), *w = arg(t, n, 5);
  if (!grad_out || !w || conv_flops_per_output(*w) < 0) return -1;
  int64_t passes = (arg(t, n, 0) ? 1 : 0) + (arg(t, n, 1) ? 1 : 0);
  return passes * grad_out->numel() * conv_flops_per_output(*w);
}

// q (*, L, E), k (*, S, E), v (*, S, Ev) at argument positions qi, qi+1, qi+2: returns B*L*S and sets E, Ev.
bool attention_dims(const Tensor* const* t, int n, int qi, int64_t& bls, int64_t& e, int64_t& ev) {
  const Tensor *q = arg(t, n, qi), *k = arg(t, n, qi + 1), *v = arg(t, n, qi + 2);
  if (!q || !k || !v || q->dim() < 2 || k->dim() < 2 || v->dim() < 2) return false;
  e = last_dim(*q, 1);
  ev = last_dim(*v, 1);
  bls = q->numel() / (e ? e : 1) * last_dim(*k, 2);  // (B * L) * S
  return true;
}

// Forward: scores q k^T and out = p v. Causal masking is not discounted.
int64_t attention_flops(const Tensor* const* t, int n) {
  int64_t bls, e, ev;
  return attention_dims(t, n, 2, bls, e, ev) ? 2 * bls * (e + ev) : -1;
}

// Backward: recomputed scores (E), dv = p^T dO (Ev), dp = dO v^T (Ev), dq = ds k (E), dk = ds^T q (E).
int64_t attention_backward_flops(const Tensor* const* t, int n) {
  int64_t bls, e, ev;
  return attention_dims(t, n, 4, bls, e, ev) ? 2 * bls * (3 * e + 2 * ev) : -1;
}

// unary and binary: (op, out, inputs...); reduce: (op, out, in, mask).
int64_t elementwise_flops(const Tensor* const* t, int n) {
  const Tensor* out = arg(t, n, 1);
  return out ? out->numel() : -1;
}
int64_t reduce_flops(const Tensor* const* t, int n) {
  const Tensor* in = arg(t, n, 2);
  return in ? in->numel() : -1;
}

// The elements a tensor's memory holds for its view: a stride-0 (broadcast) dimension is read once.
int64_t distinct_elements(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim(); ++d) n *= t.stride(d) == 0 && t.size(d) > 0 ? 1 : t.size(d);
  return n;
}

}  // namespace

int64_t kernel_flops(const char* name, const Tensor* const* tensors, int count) {
  if (std::strcmp(name, "unary") == 0 || std::strcmp(name, "binary") == 0) return elementwise_flops(tensors, count);
  if (std::strcmp(name, "reduce") == 0) return reduce_flops(tensors, count);
  if (std::strcmp(name, "matmul") == 0) return matmul_flops(tensors, count);
  if (std::strcmp(name, "linear_act") == 0) return linear_act_flops(tensors, count);
  if (std::strcmp(name, "conv2d") == 0) return conv2d_flops(tensors, count);
  if (std::strcmp(name, "conv2d_backward") == 0) return conv2d_backward_flops(tensors, count);
  if (std::strcmp(name, "scaled_dot_product_attention") == 0) return attention_flops(tensors, count);
  if (std::strcmp(name, "scaled_dot_product_attention_backward") == 0) return attention_backward_flops(tensors, count);
  return -1;
}

int64_t kernel_bytes(const Tensor* const* tensors, int count) {
  int64_t bytes = 0;
  for (int i = 0; i < count; ++i)
    if (const Tensor* t = arg(tensors, count, i)) bytes += distinct_elements(*t) * int64_t(dtype_size(t->dtype()));
  return bytes;
}

}  // namespace mdl::profiler::detail
