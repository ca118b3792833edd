// The casts behind the hooks, with their per-thread cache.
#include "ops/autocast.h"

#include <unordered_map>
#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/error.h"
#include "ops/ops.h"

namespace mdl::amp {

namespace {

// One cached cast of a leaf: valid while the leaf's version and the grad mode are unchanged.
struct CachedCast {
  Tensor source;  // keeps the leaf alive, so its address cannot be reused within the region
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
      if (e.version == x.version()) return e.cast;
      e = {x, x.version(), grad_mode, target, to_dtype(x, target)};
      return e.cast;
    }
  entries.push_back({x, x.version(), grad_mode, target, to_dtype(x, target)});
  return entries.back().cast;
}

}  // namespace

size_t cast_cache_size() {
  size_t n = 0;
  for (const auto& [impl, entries] : t_cache) n += entries.size();
  return n;
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
