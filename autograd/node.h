// The graph: a Node per recorded op, holding what its backward needs (saved tensors, shapes)
// and one Edge per input to that input's Node. Leaves end in AccumulateGrad nodes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace mdl::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which output of fn the gradient is for
};

// A tensor saved for backward: a detached handle (no grad_fn, so no reference cycle) and the
// storage version at save time, checked when backward unpacks it.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor unpack(const Node& owner) const;
  void reset() { t_ = Tensor(); }
  bool defined() const { return t_.defined(); }

 private:
  Tensor t_;
  uint64_t version_ = 0;
};

// What backward needs of an output that may be freed before it runs: a gradient of zeros for it.
struct OutputMeta {
  Shape shape;
  DType dtype = kF32;
  Device device;
  bool differentiable = false;  // a floating output, recorded with this node as its grad_fn
};

class Node {
 public:
  virtual ~Node() = default;
  // Gradients w.r.t. each output in; gradients w.r.t. each input out (undefined: none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  virtual const char* name() const = 0;
  // Frees saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}

  std::vector<Edge> next_edges;
  std::vector<std::weak_ptr<TensorImpl>> outputs;  // for retain_grad on non-leaves
  std::vector<OutputMeta> output_meta;             // one per output, alive or freed
  bool released = false;                           // saved tensors already freed
  uint64_t sequence_nr = 0;                        // creation order: later nodes run first
};

// The sink for a leaf: adds the incoming gradient into leaf.grad().
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const char* name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// True when grad mode is on and any of the tensors requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// Connects `node` to its inputs and makes it the grad_fn of the outputs.
void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);

// Runs backward from roots with the given gradients (engine.cpp).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

}  // namespace mdl::autograd
