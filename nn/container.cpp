// Sequential (with the fused ReLU + max pool, or the pool-before-ReLU reordering) and ModuleList.
#include "nn/container.h"

#include <atomic>
#include <typeinfo>

#include "nn/functional.h"
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

namespace {

// The max pool of a ReLU and a MaxPool2d at layers i and i + 1, in either order; else null. Exact
// types: a subclass may override forward, which the fused op would skip.
template <class M>
const M* exactly(const Module* m) {
  return m && typeid(*m) == typeid(M) ? static_cast<const M*>(m) : nullptr;
}

const MaxPool2d* relu_pool_pair(const std::vector<ModulePtr>& layers, size_t i) {
  if (i + 1 >= layers.size()) return nullptr;
  const Module* a = layers[i].get();
  const Module* b = layers[i + 1].get();
  if (exactly<ReLU>(a)) return exactly<MaxPool2d>(b);
  if (exactly<ReLU>(b)) return exactly<MaxPool2d>(a);
  return nullptr;
}

}  // namespace

// A ReLU beside a max pool runs as one fused op (fused_pool_relu), else a ReLU followed by a max
// pool runs as the pool, then the ReLU (pool_before_relu). While an observer sees each layer's
// output (nn::summary), the layers run as written.
Tensor Sequential::forward(const Tensor& x) {
  const bool rewrite = !detail::forward_observed();
  const bool fuse = rewrite && toggles::fused_pool_relu(), swap = rewrite && toggles::pool_before_relu();
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (const MaxPool2d* pool = fuse || swap ? relu_pool_pair(layers_, i) : nullptr) {
      if (fuse) {
        h = functional::max_pool2d_relu(h, pool->kernel, pool->stride, pool->padding);
        ++i;
        continue;
      }
      if (exactly<ReLU>(layers_[i].get())) {
        h = (*layers_[i])((*layers_[i + 1])(h));
        ++i;
        continue;
      }
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
