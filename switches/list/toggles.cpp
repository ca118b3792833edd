// The toggles' flags, initialised to their declared defaults, and their change hooks.
#include "switches/list/toggles.h"

namespace mdl::toggles {

namespace {
// The words switches.def uses for a default.
namespace declared {
constexpr bool on = true;
constexpr bool off = false;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool on_unless_asan = false;
#else
constexpr bool on_unless_asan = true;
#endif
}  // namespace declared

constexpr bool kDefaults[kCount] = {
#define MDL_TOGGLE(id, dflt, ...) declared::dflt,
#define MDL_OPTION(...)
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION
};

constexpr const char* kNames[kCount] = {
#define MDL_TOGGLE(id, ...) #id,
#define MDL_OPTION(...)
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION
};

std::atomic<Hook> g_hooks[kCount] = {};
}  // namespace

namespace detail {
std::atomic<bool> flags[kCount] = {
#define MDL_TOGGLE(id, dflt, ...) declared::dflt,
#define MDL_OPTION(...)
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION
};
}  // namespace detail

void set(Toggle t, bool on) {
  detail::flags[int(t)].store(on, std::memory_order_relaxed);
  if (Hook hook = g_hooks[int(t)].load(std::memory_order_acquire)) hook(on);
}

bool default_value(Toggle t) { return kDefaults[int(t)]; }

const char* name(Toggle t) { return kNames[int(t)]; }

bool on_change(Toggle t, Hook hook) {
  g_hooks[int(t)].store(hook, std::memory_order_release);
  return true;
}

}  // namespace mdl::toggles
