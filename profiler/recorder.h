// The recorder behind the hooks: per-thread event buffers registered with the active session,
// appended to without locks and merged when the session stops. Used by the hook sites
// (autograd engine, Module, allocator, DataLoader) and by Session; users see profiler/session.h.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/event.h"
#include "tensor/profiler_hook.h"

namespace mdl::profiler::detail {

// Opens a range on the calling thread. False when no session records (or it skips this kind,
// e.g. Module without record_modules); then close_range() must not be called for it.
bool open_range(const char* name, EventKind kind, Device device = Device::cpu());
void close_range();

// A range closed when the C++ scope ends (also by an exception). Hook sites test recording()
// before open(), so a name that costs something to build is only built when profiling:
//   ScopedRange range;
//   if (recording()) range.open(backward_name(node.name()), EventKind::Backward);
class ScopedRange {
 public:
  ScopedRange() = default;
  ~ScopedRange() {
    if (open_) close_range();
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
  void open(const char* name, EventKind kind) {
    if (!open_) open_ = open_range(name, kind);
  }

 private:
  bool open_ = false;
};

// A copy of name that lives as long as the process (event names outlive their sources).
const char* intern(std::string_view name);
// "<op>Backward" for an autograd node's name (a string literal); "AccumulateGrad" stays as is.
const char* backward_name(const char* op);

// The session's side.
struct Config {
  bool record_shapes = false;
  bool memory = true;
  bool modules = true;
  int64_t t0_ns = 0;  // steady clock at the start; event times are relative to it
};
struct Harvest {
  std::vector<Event> events;
  std::vector<MemoryEvent> memory;
  std::vector<ThreadInfo> threads;
};
int64_t clock_ns();
void start_recording(const Config& config);  // throws mdl::Error when a session records already
Harvest stop_recording();
void set_current_thread_name(std::string name);

}  // namespace mdl::profiler::detail
