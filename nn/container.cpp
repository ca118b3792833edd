// Sequential and ModuleList.
#include "nn/container.h"

namespace mdl::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) { push_back(std::to_string(layers_.size()), std::move(m)); }

void Sequential::push_back(const std::string& name, ModulePtr m) {
  add_child(name, m);
  layers_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : layers_) h = (*m)(h);
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
