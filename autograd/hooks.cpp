// The registry of post-accumulate-grad hooks, keyed by the leaf's TensorImpl; the engine asks it
// which AccumulateGrad nodes to count and calls run_post_accumulate_grad_hooks when a leaf is done.
#include "autograd/hooks.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/error.h"

namespace mdl::autograd {
namespace {

struct Entry {
  uint64_t handle;
  std::weak_ptr<TensorImpl> leaf;  // a freed leaf's address may be reused: its hooks must not fire
  PostAccumulateGradHook hook;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const TensorImpl*, std::vector<Entry>> hooks;
  std::atomic<size_t> count{0};
  uint64_t next = 1;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

uint64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  MDL_CHECK(leaf.defined(), "register_post_accumulate_grad_hook: undefined tensor");
  MDL_CHECK(leaf.requires_grad() && leaf.is_leaf(), "register_post_accumulate_grad_hook: the tensor of shape ",
            shape_str(leaf.shape()), " is not a leaf that requires grad");
  MDL_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: empty hook");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const uint64_t handle = r.next++;
  r.hooks[leaf.impl()].push_back({handle, leaf.impl_ptr(), std::move(hook)});
  ++r.count;
  return handle;
}

void remove_post_accumulate_grad_hook(uint64_t handle) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto it = r.hooks.begin(); it != r.hooks.end(); ++it) {
    auto& v = it->second;
    auto e = std::find_if(v.begin(), v.end(), [&](const Entry& x) { return x.handle == handle; });
    if (e == v.end()) continue;
    v.erase(e);
    --r.count;
    if (v.empty()) r.hooks.erase(it);
    return;
  }
}

namespace detail {

bool has_post_accumulate_grad_hooks() { return registry().count.load() > 0; }

bool has_post_accumulate_grad_hook(const TensorImpl* leaf) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.hooks.find(leaf);
  if (it == r.hooks.end()) return false;
  for (const Entry& e : it->second)
    if (e.leaf.lock().get() == leaf) return true;
  return false;
}

void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  std::vector<PostAccumulateGradHook> to_run;  // copied, so a hook may add or remove hooks
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.hooks.find(leaf.get());
    if (it == r.hooks.end()) return;
    for (const Entry& e : it->second)
      if (e.leaf.lock() == leaf) to_run.push_back(e.hook);
  }
  const Tensor t(leaf);
  for (const auto& h : to_run) h(t);
}

}  // namespace detail
}  // namespace mdl::autograd
