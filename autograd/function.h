// FnNode: a graph node whose backward is a lambda written right beside its forward op.
//   record_fn("mul", {a, b}, {out}, {a, b}, [](const Grads& g, const FnNode& n) {
//     return Grads{g[0] * n.saved(1), g[0] * n.saved(0)};
//   });
// Saved tensors are version-checked when unpacked and freed after backward. Each input's
// gradient is cast back to that input's dtype.
#pragma once
#include <functional>

#include "autograd/node.h"

namespace mdl::autograd {

using Grads = std::vector<Tensor>;

class FnNode final : public Node {
 public:
  using Backward = std::function<Grads(const Grads& grad_outputs, const FnNode& self)>;
  FnNode(const char* name, std::vector<SavedTensor> saved, std::vector<DType> input_dtypes, Backward backward)
      : name_(name), saved_(std::move(saved)), input_dtypes_(std::move(input_dtypes)), backward_(std::move(backward)) {}

  Grads apply(Grads&& grad_outputs) override;
  const char* name() const override { return name_; }
  void release_saved() override { saved_.clear(); }

  Tensor saved(size_t i) const;  // unpacks saved tensor i (checked)
  bool needs(size_t input) const { return input < next_edges.size() && next_edges[input].fn != nullptr; }

 private:
  const char* name_;
  std::vector<SavedTensor> saved_;
  std::vector<DType> input_dtypes_;
  Backward backward_;
};

// Records `outputs` as produced by op `name` from `inputs` when any input needs grad.
void record_fn(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
               const std::vector<Tensor>& to_save, FnNode::Backward backward);

}  // namespace mdl::autograd
