// Session: starts and stops the recorder, then orders what it harvested (per thread, by start,
// each event linked to the one enclosing it) and adds device-side kernel times when a
// DeviceTimer is installed. The table and the trace live in table.cpp and trace.cpp.
#include "profiler/session.h"

#include <algorithm>
#include <map>

#include "profiler/device_timer.h"
#include "profiler/recorder.h"
#include "tensor/error.h"

namespace mdl::profiler {

Session::Session(Options options) : options_(options) {
  t0_ns_ = detail::clock_ns();
  detail::start_recording({.record_shapes = options.record_shapes,
                           .memory = options.memory,
                           .modules = options.record_modules,
                           .t0_ns = t0_ns_});
  recording_ = true;
  if (DeviceTimer* timer = device_timer()) timer->reset();
}

Session::~Session() {
  if (recording_) detail::stop_recording();
}

void Session::step() {
  MDL_CHECK(recording_, "profiler: step() after stop()");
  step_marks_.push_back(detail::clock_ns() - t0_ns_);
}

void Session::stop() {
  if (!recording_) return;
  duration_ns_ = detail::clock_ns() - t0_ns_;
  detail::Harvest h = detail::stop_recording();
  recording_ = false;
  events_ = std::move(h.events);
  memory_ = std::move(h.memory);
  threads_ = std::move(h.threads);
  add_device_events();
  std::stable_sort(memory_.begin(), memory_.end(),
                   [](const MemoryEvent& a, const MemoryEvent& b) { return a.t_ns < b.t_ns; });
  link_parents();
}

// Device kernels go on one track per (device, stream), shifted so the first one starts
// when its launch did (the device clock has its own origin).
void Session::add_device_events() {
  DeviceTimer* timer = device_timer();
  if (!timer) return;
  timer->synchronize();
  std::vector<Event> device_events;
  std::map<std::pair<int, int>, uint32_t> tracks;  // (device index, stream) -> tid
  int64_t offset = 0;
  bool have_offset = false;
  std::vector<const Event*> launches;
  for (const Event& e : events_)
    if (e.device_token) launches.push_back(&e);
  std::sort(launches.begin(), launches.end(), [](const Event* a, const Event* b) { return a->start_ns < b->start_ns; });
  for (const Event* launch : launches) {
    DeviceTimer::Timing t = timer->resolve(launch->device_token);
    if (!t.valid) continue;
    if (!have_offset) {
      offset = launch->start_ns - t.start_ns;
      have_offset = true;
    }
    auto key = std::make_pair(launch->device.index, t.stream);
    auto it = tracks.find(key);
    if (it == tracks.end()) {
      uint32_t tid = uint32_t(threads_.size());
      threads_.push_back({tid, launch->device.str() + " stream " + std::to_string(t.stream)});
      it = tracks.emplace(key, tid).first;
    }
    Event d = *launch;
    d.kind = EventKind::DeviceKernel;
    d.tid = it->second;
    d.device_token = 0;
    d.start_ns = t.start_ns + offset;
    d.end_ns = d.start_ns + t.dur_ns;
    device_events.push_back(d);
  }
  timer->reset();
  events_.insert(events_.end(), device_events.begin(), device_events.end());
}

// Per thread, by start (an enclosing event before what it encloses), then a stack walk.
void Session::link_parents() {
  std::stable_sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;
  });
  self_ns_.assign(events_.size(), 0);
  std::vector<int32_t> stack;
  for (size_t i = 0; i < events_.size(); ++i) {
    Event& e = events_[i];
    if (i && events_[i - 1].tid != e.tid) stack.clear();
    while (!stack.empty() && events_[size_t(stack.back())].end_ns <= e.start_ns) stack.pop_back();
    // Device tracks hold kernels one after another: no nesting there.
    e.parent = stack.empty() || e.kind == EventKind::DeviceKernel ? -1 : stack.back();
    self_ns_[i] = e.dur_ns();
    if (e.parent >= 0) self_ns_[size_t(e.parent)] -= e.dur_ns();
    stack.push_back(int32_t(i));
  }
}

void Session::require_stopped(const char* what) const {
  MDL_CHECK(!recording_, "profiler: ", what, " needs the session stopped first (call stop())");
}

const std::vector<Event>& Session::events() const {
  require_stopped("events()");
  return events_;
}
const std::vector<MemoryEvent>& Session::memory_events() const {
  require_stopped("memory_events()");
  return memory_;
}
const std::vector<ThreadInfo>& Session::threads() const {
  require_stopped("threads()");
  return threads_;
}
int64_t Session::duration_ns() const {
  require_stopped("duration_ns()");
  return duration_ns_;
}
int64_t Session::self_ns(size_t i) const {
  require_stopped("self_ns()");
  MDL_CHECK(i < self_ns_.size(), "profiler: self_ns(", i, ") but the session has ", self_ns_.size(), " events");
  return self_ns_[i];
}

std::vector<MemorySummary> Session::memory_summary() const {
  require_stopped("memory_summary()");
  std::vector<MemorySummary> out;
  for (const MemoryEvent& m : memory_) {
    auto it = std::find_if(out.begin(), out.end(), [&](const MemorySummary& s) { return s.device == m.device; });
    if (it == out.end()) {
      out.push_back({.device = m.device});
      it = out.end() - 1;
    }
    if (m.delta >= 0) {
      it->allocated_bytes += m.delta;
      ++it->allocations;
    } else {
      it->freed_bytes -= m.delta;
      ++it->frees;
    }
    it->peak_live = std::max(it->peak_live, m.live);
    it->end_live = m.live;
  }
  return out;
}

}  // namespace mdl::profiler
