// Sequential (with the pool-before-ReLU reordering) and ModuleList.
#include "nn/container.h"

#include <atomic>

#include "nn/layers.h"
#include "switches/list/toggles.h"

namespace mdl::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) { push_back(std::to_string(layers_.size()), std::move(m)); }

void Sequential::push_back(const std::string& name, ModulePtr m) {
  add_child(name, m);
  layers_.push_back(std::move(m));
}

namespace {}  // namespace


Tensor Sequential::forward(const Tensor& x) {
  const bool swap = toggles::pool_before_relu() && !detail::forward_observed();
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (swap && i + 1 < layers_.size() && dynamic_cast<const ReLU*>(layers_[i].get()) &&
        dynamic_cast<const MaxPool2d*>(layers_[i + 1].get())) {
      h = (*layers_[i])((*layers_[i + 1])(h));
      ++i;
      continue;
    }
    h = (*layers_[i])(h);
  }
  return h;
}

const ModulePtr& Sequential::operator[](size_t i) const {
  MDL_CHECK(i < layers_.size(), "Sequential: index ", i, " out of range for ", layers_.size(), " layers");
  return layers_[i];
}

void ModuleList::push_back(ModulePtr m) {
  add_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

const ModulePtr& ModuleList::operator[](size_t i) const {
  MDL_CHECK(i < items_.size(), "ModuleList: index ", i, " out of range for ", items_.size(), " modules");
  return items_[i];
}

}  // namespace mdl::nn
