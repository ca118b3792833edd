// The process-wide optimization toggles, generated from switches/list/switches.def: for each entry
// MDL_TOGGLE(name, ...) a flag, toggles::name() that reads it and toggles::set_name(on) that flips it.
// The kernels read the flag where they choose their path:
//
//   if (!toggles::direct_conv()) return nullptr;  // cpu/conv_direct.cpp: im2col + GEMM instead
//
// The lowest layer, so that every backend can read a toggle; the catalogue with names, text and
// benchmark pairs is switches/switches.h.
#pragma once
#include <atomic>

namespace mdl::toggles {

enum class Toggle : int {
#define MDL_TOGGLE(id, ...) id,
#define MDL_OPTION(...)
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION
};

inline constexpr int kCount = 0
#define MDL_TOGGLE(id, ...) +1
#define MDL_OPTION(...)
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION
    ;

namespace detail {
extern std::atomic<bool> flags[kCount];
}

inline bool get(Toggle t) { return detail::flags[int(t)].load(std::memory_order_relaxed); }
// Stores the flag, then runs the toggle's change hook if one is registered.
void set(Toggle t, bool on);
bool default_value(Toggle t);
const char* name(Toggle t);

// A toggle whose change must act at once (drop a cache, set a control register) registers a hook,
// called on the setting thread after the flag is stored. One hook per toggle; returns true so that it
// can initialise a static: `const bool hooked = toggles::on_change(Toggle::x, &hook);`
using Hook = void (*)(bool on);
bool on_change(Toggle t, Hook hook);

#define MDL_TOGGLE(id, ...)                    \
  inline bool id() { return get(Toggle::id); } \
  inline void set_##id(bool on) { set(Toggle::id, on); }
#define MDL_OPTION(...)
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION

// Sets a toggle for a scope and restores what it was.
class Scoped {
 public:
  Scoped(Toggle t, bool on) : t_(t), was_(get(t)) { set(t, on); }
  ~Scoped() { set(t_, was_); }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;

 private:
  Toggle t_;
  bool was_;
};

}  // namespace mdl::toggles
