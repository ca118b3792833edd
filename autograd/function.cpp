// FnNode and record_fn.
#include "autograd/function.h"

#include "ops/native/factory.h"
#include "ops/native/native.h"

namespace mdl::autograd {

Tensor FnNode::saved(size_t i) const {
  MDL_CHECK(!released, "backward: trying to backward through the graph a second time (the saved tensors of ", name_,
            " were freed after the first backward); pass retain_graph=true to the first backward");
  MDL_CHECK(i < saved_.size(), "autograd: ", name_, " asked for saved tensor ", i, " of ", saved_.size());
  return saved_[i].unpack(*this);
}

Grads FnNode::apply(Grads&& grad_outputs) {
  bool any = false;
  for (const Tensor& g : grad_outputs) any = any || g.defined();
  if (!any) return Grads(next_edges.size());
  // An output that got no gradient (unused by the loss, or already freed) contributes zeros.
  for (size_t k = 0; k < grad_outputs.size(); ++k) {
    if (k >= output_meta.size() || !output_meta[k].differentiable) continue;
    const OutputMeta& m = output_meta[k];
    if (!grad_outputs[k].defined()) grad_outputs[k] = full({}, 0.0, TensorOptions(m.dtype, m.device));
    if (grad_outputs[k].shape() != m.shape) grad_outputs[k] = native::expand(grad_outputs[k], m.shape);
  }
  Grads in = backward_(grad_outputs, *this);
  for (size_t i = 0; i < in.size() && i < input_dtypes_.size(); ++i)
    if (in[i].defined() && in[i].dtype() != input_dtypes_[i]) in[i] = native::to_dtype(in[i], input_dtypes_[i]);
  return in;
}

void record_fn(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
               const std::vector<Tensor>& to_save, FnNode::Backward backward) {
  if (!needs_grad(inputs)) return;
  std::vector<SavedTensor> saved;
  saved.reserve(to_save.size());
  for (const Tensor& t : to_save) saved.emplace_back(t);
  std::vector<DType> dtypes;
  for (const Tensor& t : inputs) dtypes.push_back(t.defined() ? t.dtype() : kF32);
  record(std::make_shared<FnNode>(name, std::move(saved), std::move(dtypes), std::move(backward)), inputs, outputs);
}

}  // namespace mdl::autograd
