// nn::functional::scaled_dot_product_attention as one fused op with its own backward (node
// "scaled_dot_product_attention"). It saves q, k, v, out and a logsumexp per query row, never the
// (L, S) probabilities: the backward kernel recomputes them block by block.
// A query row that may attend to no key (every key masked) outputs zeros and passes back zero
// gradients, where PyTorch gives NaN: padded batches then train without NaN guards.
// With the fused_attention switch off it is composed of ops instead, with the same results.
// packed_self_attention is the same op on one packed (B, L, 3E) projection: its heads are read in
// place through strides and its output and gradient written in the block's layout, with no copies.
#include <atomic>
#include <cmath>

#include "ops/autocast.h"
#include "autograd/function.h"
#include "autograd/op_registry.h"
#include "switches/list/toggles.h"
#include "nn/functional.h"
#include "ops/native/factory.h"
#include "ops/ops.h"
#include "kernels/attention.h"
#include "ops/native/native.h"

namespace mdl::nn::functional {

MDL_DIFFERENTIABLE_OPS("scaled_dot_product_attention", "packed_self_attention");

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }
Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// True when `from` broadcasts to `to` without adding dims to `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != 1 && from[d] != to[lead + d]) return false;
  return true;
}

// Checks the operands; returns the batch dims q, k and v broadcast to.
Shape check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  MDL_CHECK(q.defined() && k.defined() && v.defined(), kOp, ": q, k and v must be defined");
  MDL_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kOp,
            ": expected q (.., L, E), k (.., S, E), v (.., S, Ev) of at least 2 dims, got shapes ", q.shape(), ", ",
            k.shape(), ", ", v.shape());
  MDL_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), kOp,
            ": q, k, v must share one floating dtype, got ", q.dtype(), ", ", k.dtype(), ", ", v.dtype());
  MDL_CHECK(k.device() == q.device() && v.device() == q.device(), kOp, ": q, k, v must be on one device, got ",
            q.device(), ", ", k.device(), ", ", v.device());
  MDL_CHECK(q.size(-1) == k.size(-1), kOp, ": q ", q.shape(), " and k ", k.shape(),
            " must have the same embedding dim E (last dim)");
  MDL_CHECK(k.size(-2) == v.size(-2), kOp, ": k ", k.shape(), " and v ", v.shape(),
            " must have the same number of keys S (dim -2)");
  Shape batch = batch_dims(q);
  for (const Tensor* t : {&k, &v}) {
    const Shape b = batch_dims(*t);
    if (b.size() > batch.size()) batch.insert(batch.begin(), b.size() - batch.size(), 1);
    const size_t lead = batch.size() - b.size();
    for (size_t d = 0; d < b.size(); ++d) {
      int64_t& have = batch[lead + d];
      MDL_CHECK(b[d] == have || b[d] == 1 || have == 1, kOp, ": the batch dims of q ", q.shape(), ", k ", k.shape(),
                " and v ", v.shape(), " do not broadcast");
      if (have == 1) have = b[d];
    }
  }
  if (mask.defined()) {
    MDL_CHECK(mask.dtype() == kBool, kOp, ": mask must be Bool (true = attend), got ", mask.dtype(), " ", mask.shape());
    MDL_CHECK(mask.device() == q.device(), kOp, ": mask is on ", mask.device(), ", q on ", q.device());
    const Shape target = with_matrix(batch, q.size(-2), k.size(-2));
    MDL_CHECK(broadcasts_to(mask.shape(), target), kOp, ": mask of shape ", mask.shape(),
              " does not broadcast to (.., L, S) = ", target);
  }
  return batch;
}

Tensor expand_to(const Tensor& t, const Shape& batch) {
  return native::expand(t, with_matrix(batch, t.size(-2), t.size(-1)));
}

// The fused_attention switch off: softmax(q k^T s) v composed of autograd ops. Masked scores get a
// large finite negative value rather than -inf, and masked probabilities are zeroed after the
// softmax, so a row with every key masked gives zeros and zero gradients as the fused kernel does
// (with -inf its softmax, and then its backward, would be NaN).
Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                          double s) {
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(q, transpose(k, -2, -1)) * s;  // (.., L, S)
  if (!causal && !mask.defined()) return matmul(softmax(scores, -1), v);
  Tensor hidden = causal ? triu(ones({L, S}, {kF32, q.device()}), 1) : zeros({L, S}, {kF32, q.device()});
  if (mask.defined()) hidden = hidden + (1.0 - mask.to(kF32));
  hidden = gt(hidden, scalar_tensor(0.5, {kF32, q.device()}));  // Bool (.., L, S): true = masked
  const double lowest = q.dtype() == kF16 ? -65504.0 : -1e30;   // f16's lowest finite; far below any score
  const Tensor p = masked_fill(softmax(masked_fill(scores, hidden, lowest), -1), hidden, 0.0);
  return matmul(p, v);
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& mask,
                                    bool causal, std::optional<double> scale) {
  auto [q, k, v] = amp::autocast_lower(q_in, k_in, v_in);
  const Shape batch = check(q, k, v, mask);
  const int64_t L = q.size(-2), E = q.size(-1), S = k.size(-2), Ev = v.size(-1);
  const double s = scale ? *scale : E > 0 ? 1.0 / std::sqrt(double(E)) : 1.0;
  if (!toggles::fused_attention()) return attention_composed(q, k, v, mask, causal, s);
  const Tensor me = mask.defined() ? native::expand(mask, with_matrix(batch, L, S)) : Tensor();
  Tensor out = make_tensor(with_matrix(batch, L, Ev), q.dtype(), q.device());
  Shape row_shape = batch;
  row_shape.push_back(L);
  Tensor lse = make_tensor(row_shape, q.dtype() == kF64 ? kF64 : kF32, q.device());
  kernels::attention_forward(q.device(), out, lse, expand_to(q, batch), expand_to(k, batch), expand_to(v, batch), me,
                             causal, s);

  std::vector<Tensor> to_save = {q, k, v, out, lse};
  if (mask.defined()) to_save.push_back(me);
  autograd::record_fn(
      kOp, {q, k, v}, {out}, to_save,
      [batch, has_mask = mask.defined(), causal, s](const autograd::Grads& g, const autograd::FnNode& n) {
        const Tensor q = n.saved(0), k = n.saved(1), v = n.saved(2), out = n.saved(3), lse = n.saved(4);
        const Tensor m = has_mask ? n.saved(5) : Tensor();
        const Tensor go = g[0].dtype() == out.dtype() ? g[0] : native::to_dtype(g[0], out.dtype());
        // Gradients in the broadcast batch shape, summed back to each input's own.
        auto grad_buffer = [&](size_t i, const Tensor& t) {
          return n.needs(i) ? make_tensor(with_matrix(batch, t.size(-2), t.size(-1)), t.dtype(), t.device()) : Tensor();
        };
        Tensor dq = grad_buffer(0, q), dk = grad_buffer(1, k), dv = grad_buffer(2, v);
        kernels::attention_backward(q.device(), dq, dk, dv, go, expand_to(q, batch), expand_to(k, batch),
                                    expand_to(v, batch), out, lse, m, causal, s);
        auto back = [](const Tensor& d, const Tensor& t) { return d.defined() ? native::sum_to(d, t.shape()) : d; };
        return autograd::Grads{back(dq, q), back(dk, k), back(dv, v)};
      });
  return out;
}

Tensor packed_self_attention(const Tensor& qkv_in, int64_t num_heads, const Tensor& mask, bool causal,
                             std::optional<double> scale) {
  constexpr const char* op = "packed_self_attention";
  auto [qkv] = amp::autocast_lower(qkv_in);
  MDL_CHECK(qkv.defined() && qkv.dim() == 3 && num_heads > 0 && qkv.size(2) > 0 && qkv.size(2) % (3 * num_heads) == 0,
            op, ": expected qkv (B, L, 3 * E) with E divisible by num_heads ", num_heads, ", got shape ",
            qkv.defined() ? shape_str(qkv.shape()) : "undefined");
  const int64_t B = qkv.size(0), L = qkv.size(1), E = qkv.size(2) / 3, H = num_heads, D = E / H;
  if (!toggles::fused_attention()) {  // the block's own ops: split, heads, attention, heads joined
    const std::vector<Tensor> parts = split(qkv, E, -1);
    auto heads = [&](const Tensor& t) { return reshape(t, {B, L, H, D}).transpose(1, 2); };
    const Tensor o = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), mask, causal,
                                                  scale);
    return reshape(o.transpose(1, 2), {B, L, E});
  }
  // (B, H, L, D) views of head part `i` of a contiguous (B, L, parts * E) tensor.
  auto heads = [B, L, H, D](const Tensor& t, int64_t parts, int64_t i) {
    return native::transpose(native::select(native::view(t, {B, L, parts, H, D}), 2, i), 1, 2);
  };
  const Tensor packed = native::contiguous(qkv);
  const Tensor q = heads(packed, 3, 0), k = heads(packed, 3, 1), v = heads(packed, 3, 2);
  const Shape batch = check(q, k, v, mask);  // (B, H)
  const double s = scale ? *scale : 1.0 / std::sqrt(double(D));
  const Tensor me = mask.defined() ? native::expand(mask, with_matrix(batch, L, L)) : Tensor();
  Tensor out = make_tensor({B, L, E}, qkv.dtype(), qkv.device());
  Tensor lse = make_tensor({B, H, L}, qkv.dtype() == kF64 ? kF64 : kF32, qkv.device());
  kernels::attention_forward(qkv.device(), heads(out, 1, 0), lse, q, k, v, me, causal, s);

  std::vector<Tensor> to_save = {packed, out, lse};
  if (mask.defined()) to_save.push_back(me);
  autograd::record_fn(
      op, {qkv}, {out}, to_save,
      [heads, has_mask = mask.defined(), causal, s](const autograd::Grads& g, const autograd::FnNode& n) {
        const Tensor packed = n.saved(0), out = n.saved(1), lse = n.saved(2);
        const Tensor m = has_mask ? n.saved(3) : Tensor();
        const Tensor go = native::contiguous(g[0].dtype() == out.dtype() ? g[0] : native::to_dtype(g[0], out.dtype()));
        // The three head gradients written straight into their places in one (B, L, 3 * E) gradient.
        Tensor dqkv = make_tensor(packed.shape(), packed.dtype(), packed.device());
        kernels::attention_backward(packed.device(), heads(dqkv, 3, 0), heads(dqkv, 3, 1), heads(dqkv, 3, 2),
                                    heads(go, 1, 0), heads(packed, 3, 0), heads(packed, 3, 1), heads(packed, 3, 2),
                                    heads(out, 1, 0), lse, m, causal, s);
        return autograd::Grads{dqkv};
      });
  return out;
}

}  // namespace mdl::nn::functional
