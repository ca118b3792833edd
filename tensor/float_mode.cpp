// The flush_denormal toggle's per-thread application (MXCSR on x86; nothing elsewhere).
#include "tensor/float_mode.h"

#include "switches/list/toggles.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace mdl {

namespace {
thread_local int t_applied = -1;      // the setting this thread last applied, -1 before any
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR: flush to zero (bit 15), denormals are zero (bit 6)
}  // namespace

void sync_float_mode() {
  const int want = toggles::flush_denormal() ? 1 : 0;
  if (want == t_applied) return;
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(want ? csr | kFtzDaz : csr & ~kFtzDaz);
#endif
  t_applied = want;
}

// The setting thread applies a change at once; the others when they next run a kernel.
const bool g_hooked = toggles::on_change(toggles::Toggle::flush_denormal, [](bool) { sync_float_mode(); });

}  // namespace mdl
