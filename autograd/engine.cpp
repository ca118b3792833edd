// The backward engine: counts dependencies from the roots, then runs each node once all the
// gradients for its outputs have arrived, summing gradients that meet, latest node first.
// Saved tensors are freed as soon as their node has run, unless retain_graph is asked.
#include <algorithm>
#include <atomic>
#include <queue>
#include <unordered_map>

#include "tensor/autocast_mode.h"
#include "autograd/hooks.h"
#include "autograd/node.h"
#include "autograd/op_registry.h"
#include "profiler/recorder.h"
#include "ops/native/native.h"

namespace mdl {

namespace {
std::atomic<uint64_t> g_sequence{0};
}  // namespace

namespace autograd {

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  t_ = make_view(t, t.shape(), t.strides(), t.offset());
  version_ = t.version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  MDL_CHECK(!owner.released, "backward: trying to backward through the graph a second time (the saved tensors of ",
            owner.name(), " were freed after the first backward); pass retain_graph=true to the first backward");
  MDL_CHECK(t_.version() == version_, "backward: a tensor saved by ", owner.name(),
            " was modified by an in-place operation (version ", t_.version(), ", expected ", version_,
            "); the gradient would be wrong");
  return t_;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  Tensor leaf(leaf_);
  if (!leaf.requires_grad()) return {};  // frozen between forward and backward: no gradient, as PyTorch
  MDL_CHECK(g.shape() == leaf.shape(), "backward: gradient of shape ", shape_str(g.shape()),
            " does not match its leaf's shape ", shape_str(leaf.shape()));
  if (g.dtype() != leaf.dtype()) g = native::to_dtype(g, leaf.dtype());
  Tensor cur = leaf.grad();
  if (!cur.defined()) {
    // Taken only when nothing else holds it: the engine may hand over a view of another gradient,
    // one tensor for two leaves (add's backward), or the caller's own grad_output. Each leaf owns
    // its gradient, laid out as the leaf, so that in-place clipping or unscaling touches it once.
    const MemoryFormat f = leaf.memory_format();
    const bool sole = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1;
    leaf.set_grad(sole && g.is_contiguous(f) ? g : native::clone(g, f));
  } else {
    leaf.set_grad(native::binary(BinaryOp::Add, cur, g));
  }
  return {};
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  MDL_CHECK(is_differentiable_op(node->name()), "autograd: op ", node->name(),
            " has a backward but is missing from the registry of differentiable ops");
  node->sequence_nr = g_sequence.fetch_add(1);
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    if (!in.defined() || !in.requires_grad()) {
      node->next_edges.push_back({});
    } else if (in.grad_fn()) {
      node->next_edges.push_back({in.grad_fn(), in.impl()->output_nr});
    } else {
      // Highest priority, as PyTorch: a leaf's gradient is summed in as soon as it is ready, so its
      // post-accumulate-grad hooks (DDP's bucket all_reduce) run while backward goes on.
      auto acc = std::make_shared<AccumulateGrad>(in.impl_ptr());
      acc->sequence_nr = UINT64_MAX;
      node->next_edges.push_back({std::move(acc), 0});
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* o = outputs[i].impl();
    if (!o || !is_floating(o->dtype)) {
      node->outputs.emplace_back();
      node->output_meta.emplace_back();
      continue;
    }
    node->output_meta.push_back({o->shape, o->dtype, outputs[i].device(), true});
    o->requires_grad = true;
    o->grad_fn = node;
    o->output_nr = uint32_t(i);
    node->outputs.emplace_back(outputs[i].impl_ptr());
  }
}

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  NoGradGuard no_grad;
  amp::AutocastGuard no_autocast(kF16, /*enabled=*/false);  // backward keeps the forward's dtypes
  // 1. Dependencies: how many edges point at each node reachable from the roots.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::vector<Node*> stack;
  auto visit = [&](Node* n) {
    if (deps.emplace(n, 0).second) stack.push_back(n);
  };
  // Leaves with post-accumulate-grad hooks: how many of their AccumulateGrad nodes are still to run.
  const bool hooks = detail::has_post_accumulate_grad_hooks();
  std::unordered_map<TensorImpl*, int> pending_accumulations;
  for (const Tensor& r : roots)
    if (r.grad_fn()) visit(r.grad_fn().get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (hooks)
      if (auto* acc = dynamic_cast<AccumulateGrad*>(n); acc && detail::has_post_accumulate_grad_hook(acc->leaf().get()))
        ++pending_accumulations[acc->leaf().get()];
    for (const Edge& e : n->next_edges) {
      if (!e.fn) continue;
      visit(e.fn.get());
      ++deps[e.fn.get()];
    }
  }
  auto add_grad = [&](Node* n, uint32_t slot, const Tensor& g, size_t nslots) {
    auto& buf = buffers[n];
    if (buf.size() < nslots) buf.resize(nslots);
    if (!buf[slot].defined()) buf[slot] = g;
    else buf[slot] = native::binary(BinaryOp::Add, buf[slot], g);
  };
  // 2. Seed the roots; a leaf root accumulates directly.
  for (size_t i = 0; i < roots.size(); ++i) {
    if (roots[i].grad_fn()) {
      Node* n = roots[i].grad_fn().get();
      add_grad(n, roots[i].impl()->output_nr, grads[i], std::max<size_t>(n->outputs.size(), 1));
    } else {
      AccumulateGrad(roots[i].impl_ptr()).apply({grads[i]});
      if (hooks) detail::run_post_accumulate_grad_hooks(roots[i].impl_ptr());
    }
  }
  // 3. Run ready nodes, latest-created first (a valid topological order among the ready ones).
  auto later = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  for (auto& [n, d] : deps)
    if (d == 0) ready.push(n);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> in = std::move(buffers[n]);
    buffers.erase(n);
    in.resize(std::max<size_t>(n->outputs.size(), 1));
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      auto o = n->outputs[k].lock();
      if (o && o->retains_grad && in[k].defined()) {
        Tensor t(o);
        t.set_grad(t.grad().defined() ? native::binary(BinaryOp::Add, t.grad(), in[k]) : native::clone(in[k]));
      }
    }
    std::vector<Tensor> out;
    {
      profiler::detail::ScopedRange range;  // kernels of this node's backward nest under it
      if (profiler::detail::recording())
        range.open(profiler::detail::backward_name(n->name()), profiler::EventKind::Backward);
      out = n->apply(std::move(in));
    }
    if (!retain_graph) {
      n->release_saved();
      n->released = true;
    }
    if (!pending_accumulations.empty())
      if (auto* acc = dynamic_cast<AccumulateGrad*>(n))
        if (auto it = pending_accumulations.find(acc->leaf().get());
            it != pending_accumulations.end() && --it->second == 0)
          detail::run_post_accumulate_grad_hooks(acc->leaf());
    for (size_t i = 0; i < n->next_edges.size() && i < out.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.fn) continue;
      if (out[i].defined()) add_grad(e.fn.get(), e.input_nr, out[i], std::max<size_t>(e.fn->outputs.size(), 1));
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
    for (size_t i = out.size(); i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (e.fn && --deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
}

}  // namespace autograd

}  // namespace mdl
