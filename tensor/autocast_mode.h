// Autocast mode: the thread-local state that turns autocast on or off, and its guard. The policy
// that casts an op's inputs (the lists, the hooks, the cast cache) is in ops/autocast.h.
#pragma once
#include "tensor/dtype.h"

namespace mdl::amp {

namespace detail {
struct AutocastState {
  bool enabled = false;
  DType dtype = kF16;
  int depth = 0;  // guards alive on this thread, enabled or not
};
extern thread_local constinit AutocastState t_autocast;

// Runs when the outermost guard on a thread exits: the policy clears its cast cache there.
using RegionExitHook = void (*)();
void set_region_exit_hook(RegionExitHook hook);
}  // namespace detail

inline bool is_autocast_enabled() { return detail::t_autocast.enabled; }
// The 16-bit dtype of the innermost enabled guard (kF16 when none).
inline DType autocast_dtype() { return detail::t_autocast.dtype; }

// Turns autocast on (dtype kF16 or kBF16) or, with enabled = false, off for a scope. Guards nest;
// each restores the state it found.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = kF16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  detail::AutocastState prev_;
};

}  // namespace mdl::amp
