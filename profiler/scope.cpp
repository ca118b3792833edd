// Scope and Phase: RAII ranges over the recorder (profiler/recorder.h).
#include "profiler/scope.h"

#include "profiler/recorder.h"

namespace mdl::profiler {

Scope::Scope(std::string_view name) {
  if (detail::recording()) open_ = detail::open_range(detail::intern(name), EventKind::Scope);
}

Scope::Scope(std::string_view name, AsPhase) {
  if (detail::recording()) open_ = detail::open_range(detail::intern(name), EventKind::Phase);
}

Scope::~Scope() {
  if (open_) detail::close_range();
}

void set_thread_name(std::string name) { detail::set_current_thread_name(std::move(name)); }

}  // namespace mdl::profiler
