// The flush_denormal setting and its per-thread application (MXCSR on x86; nothing elsewhere).
#include "tensor/float_mode.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace mdl {

namespace {
std::atomic<int> g_flush{1};
thread_local int t_applied = -1;      // the setting this thread last applied, -1 before any
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR: flush to zero (bit 15), denormals are zero (bit 6)
}  // namespace

void sync_float_mode() {
  const int want = g_flush.load(std::memory_order_relaxed);
  if (want == t_applied) return;
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(want ? csr | kFtzDaz : csr & ~kFtzDaz);
#endif
  t_applied = want;
}

void set_flush_denormal(bool on) {
  g_flush.store(on ? 1 : 0, std::memory_order_relaxed);
  sync_float_mode();
}

bool flush_denormal() { return g_flush.load(std::memory_order_relaxed) != 0; }

}  // namespace mdl
