// The casts behind the hooks, with their per-thread cast cache and the process-wide weight cache.
#include "ops/autocast.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/api.h"
#include "ops/native/native.h"
#include "ops/ops.h"
#include "switches/list/toggles.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace mdl::amp {

namespace {

// ---- the weight cache ----------------------------------------------------------------------------
// One copy per parameter, in the dtype last asked for. Process-wide, as an optimizer may step on
// another thread than the forward's; never destroyed, so that no device memory is freed after the
// device's teardown at exit.
struct WeightCopy {
  std::weak_ptr<TensorImpl> source;  // expired: the parameter died, and its address may be reused
  std::weak_ptr<Storage> storage;    // the parameter's storage (Module::to gives it a new one)
  uint64_t version = 0;              // that storage's, when the copy was made or rewritten
  Tensor copy;
};
struct WeightCache {
  std::mutex mutex;
  std::unordered_map<const TensorImpl*, WeightCopy> copies;
};
WeightCache& weight_cache() {
  static auto* cache = new WeightCache;
  return *cache;
}

bool current(const WeightCopy& e, const Tensor& x) {
  return !e.source.expired() && e.storage.lock() == x.storage() && e.version == x.version();
}

// x's copy in target from the cache, or a new cast that the cache keeps.
Tensor weight_copy(const Tensor& x, DType target) {
  WeightCache& cache = weight_cache();
  {
    std::lock_guard lock(cache.mutex);
    auto it = cache.copies.find(x.impl());
    if (it != cache.copies.end() && current(it->second, x) && it->second.copy.dtype() == target) return it->second.copy;
  }
  Tensor copy = native::to_dtype(x, target);
  if (cuda::is_capturing()) return copy;  // memory from a CUDA Graph's pool is not kept past the graph
  std::lock_guard lock(cache.mutex);
  if (!cache.copies.contains(x.impl()))  // a new parameter: drop the copies of those that died
    std::erase_if(cache.copies, [](const auto& kv) { return kv.second.source.expired(); });
  cache.copies[x.impl()] = {x.impl_ptr(), x.storage(), x.version(), copy};
  return copy;
}

const bool kClearsWhenOff = toggles::on_change(toggles::Toggle::amp_weight_cache, [](bool on) {
  if (!on) clear_weight_cache();
});

// The cast of the parameter x: from the weight cache when amp_weight_cache is on (under grad mode an
// alias of the copy with a to_dtype node, so that the gradient still reaches x), else a new cast.
Tensor parameter_cast(const Tensor& x, DType target) {
  if (!toggles::amp_weight_cache()) return to_dtype(x, target);
  const Tensor copy = weight_copy(x, target);
  if (!GradMode::is_enabled()) return copy;
  return detail::to_dtype_node(x, copy);
}

// ---- the cast cache ------------------------------------------------------------------------------

// One cached cast of a leaf: valid while the leaf's version and the grad mode are unchanged.
struct CachedCast {
  Tensor source;                     // keeps the leaf alive, so its address cannot be reused within the region
  std::shared_ptr<Storage> storage;  // the leaf's when cast (Module::to gives it a new one)
  uint64_t version;
  bool grad_mode;
  DType dtype;
  Tensor cast;
};
thread_local std::unordered_map<const TensorImpl*, std::vector<CachedCast>> t_cache;

void clear_cache() {
  if (!t_cache.empty()) t_cache.clear();
}

Tensor cached_cast(const Tensor& x, DType target) {
  // Only leaves that require grad are cached (parameters): activations are cast once anyway.
  if (!x.requires_grad() || !x.is_leaf()) return to_dtype(x, target);
  // The cache fills only here, so the outermost guard's exit learns to clear it before it can hold a cast.
  static const bool hooked = (detail::set_region_exit_hook(&clear_cache), true);
  (void)hooked;
  const bool grad_mode = GradMode::is_enabled();
  auto& entries = t_cache[x.impl()];
  for (auto& e : entries)
    if (e.dtype == target && e.grad_mode == grad_mode) {
      if (e.storage == x.storage() && e.version == x.version()) return e.cast;
      e = {x, x.storage(), x.version(), grad_mode, target, parameter_cast(x, target)};
      return e.cast;
    }
  entries.push_back({x, x.storage(), x.version(), grad_mode, target, parameter_cast(x, target)});
  return entries.back().cast;
}

}  // namespace

size_t cast_cache_size() {
  size_t n = 0;
  for (const auto& [impl, entries] : t_cache) n += entries.size();
  return n;
}

size_t weight_cache_size() {
  WeightCache& cache = weight_cache();
  std::lock_guard lock(cache.mutex);
  return size_t(std::count_if(cache.copies.begin(), cache.copies.end(),
                              [](const auto& kv) { return !kv.second.source.expired(); }));
}

void clear_weight_cache() {
  WeightCache& cache = weight_cache();
  std::unordered_map<const TensorImpl*, WeightCopy> dropped;
  std::lock_guard lock(cache.mutex);
  dropped.swap(cache.copies);
}

Tensor fresh_weight_copy(const Tensor& param) {
  WeightCache& cache = weight_cache();
  std::lock_guard lock(cache.mutex);
  auto it = cache.copies.find(param.impl());
  if (it == cache.copies.end() || !current(it->second, param)) return Tensor();
  const Tensor& copy = it->second.copy;
  if (copy.device() != param.device() || copy.strides() != param.strides()) return Tensor();
  return copy;
}

void weight_copy_rewritten(const Tensor& param, const Tensor& copy) {
  copy.bump_version();
  WeightCache& cache = weight_cache();
  std::lock_guard lock(cache.mutex);
  auto it = cache.copies.find(param.impl());
  if (it != cache.copies.end() && it->second.copy.is_same(copy) && !it->second.source.expired())
    it->second.version = param.version();
}

namespace detail {

Tensor cast_lower(const Tensor& x, DType target) {
  if (!x.defined() || !x.is_floating_point() || x.dtype() == kF64 || x.dtype() == target) return Tensor();
  return cached_cast(x, target);
}

Tensor cast_f32(const Tensor& x) {
  if (!x.defined() || (x.dtype() != kF16 && x.dtype() != kBF16)) return Tensor();
  return cached_cast(x, kF32);
}

}  // namespace detail
}  // namespace mdl::amp
