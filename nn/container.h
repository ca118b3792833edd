// Containers: Sequential chains single-input modules; ModuleList holds modules by index.
// Children are named "0", "1", ... so parameter names match PyTorch's ("features.0.weight").
#pragma once
#include <initializer_list>

#include "nn/module.h"

namespace mdl::nn {

// Sequential runs a ReLU beside a MaxPool2d (in either order) as one op, functional::
// max_pool2d_relu: on the CPU one pass over the input with a byte per window kept for the
// backward (the fused_pool_relu switch, on by default). With that switch off, a ReLU followed by a
// MaxPool2d runs as the pool, then the ReLU (pool_before_relu, on by default). Both are exact: a
// max commutes with the non-decreasing ReLU, gradients included (the same element wins each
// window; a window whose max is not positive passes no gradient either way; NaN propagates either
// way). Neither applies while nn::summary or a hook observes the layers' outputs.

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<ModulePtr> modules);
  void push_back(ModulePtr m);
  // A named child (names must not clash with the numbered ones).
  void push_back(const std::string& name, ModulePtr m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  const ModulePtr& operator[](size_t i) const;

 private:
  std::vector<ModulePtr> layers_;
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  void push_back(ModulePtr m);
  size_t size() const { return items_.size(); }
  const ModulePtr& operator[](size_t i) const;
  std::vector<ModulePtr>::const_iterator begin() const { return items_.begin(); }
  std::vector<ModulePtr>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<ModulePtr> items_;
};

}  // namespace mdl::nn
