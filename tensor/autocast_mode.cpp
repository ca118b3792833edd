// The autocast state and its guard.
#include "tensor/autocast_mode.h"

#include <atomic>

#include "tensor/error.h"

namespace mdl::amp {

namespace detail {
thread_local constinit AutocastState t_autocast{};

namespace {
std::atomic<RegionExitHook> g_region_exit_hook{nullptr};
}  // namespace

void set_region_exit_hook(RegionExitHook hook) { g_region_exit_hook.store(hook, std::memory_order_release); }
}  // namespace detail

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : prev_(detail::t_autocast) {
  MDL_CHECK(dtype == kF16 || dtype == kBF16, "AutocastGuard: the autocast dtype must be f16 or bf16, got ",
            dtype_name(dtype));
  detail::t_autocast.enabled = enabled;
  if (enabled) detail::t_autocast.dtype = dtype;
  ++detail::t_autocast.depth;
}

AutocastGuard::~AutocastGuard() {
  const int depth = detail::t_autocast.depth - 1;
  detail::t_autocast = prev_;
  detail::t_autocast.depth = depth;
  if (depth != 0) return;
  if (detail::RegionExitHook hook = detail::g_region_exit_hook.load(std::memory_order_acquire)) hook();
}

}  // namespace mdl::amp
