// profiler::Session: while it lives (or until stop()), records every kernel call (name, shapes
// and dtypes, device, time), autograd backward nodes, module calls, step phases and allocator
// events on every thread; then prints a table like torch's key_averages().table() and writes
// a Chrome trace (chrome://tracing, ui.perfetto.dev).
//   profiler::Session prof({.record_shapes = true, .memory = true});
//   for (...) { train_step(); prof.step(); }
//   prof.stop();
//   std::cout << prof.table();
//   prof.export_chrome_trace("trace.json");
#pragma once
#include <string>
#include <vector>

#include "profiler/event.h"
#include "profiler/roofline.h"
#include "profiler/scope.h"

namespace mdl::profiler {

struct Options {
  bool record_shapes = false;  // each kernel's tensor shapes and dtypes (table by shape, trace args)
  bool memory = true;          // allocator events: allocated, freed, live and peak bytes per device
  bool record_modules = true;  // a range per Module call, named by the module's type
};

// Headroom: the time above the roofline's bound, largest first (needs roofline.ceilings).
enum class SortBy { Total, Self, Calls, Name, Headroom };
struct TableOptions {
  SortBy sort_by = SortBy::Total;
  bool group_by_shape = false;  // one row per (name, shapes); needs record_shapes
  int row_limit = 0;            // 0: every row
  // With ceilings, each kernel row (CPU kernels, GPU kernels' device time) gains its arithmetic
  // intensity, achieved GB/s, the binding limit, % of the roofline bound and headroom ms per step.
  RooflineOptions roofline{};
};

class Session {
 public:
  explicit Session(Options options = {});  // starts recording; throws if another session records
  ~Session();                              // stops if still recording
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void stop();  // idempotent; the results below need it
  void step();  // marks the end of a training step (the step breakdown reports per-step means)
  bool recording() const { return recording_; }

  // Sorted by thread, then start; each event's parent is set.
  const std::vector<Event>& events() const;
  const std::vector<MemoryEvent>& memory_events() const;  // in time order
  const std::vector<ThreadInfo>& threads() const;         // indexed by Event::tid
  std::vector<MemorySummary> memory_summary() const;      // one per device seen
  int64_t duration_ns() const;
  int64_t steps() const { return int64_t(step_marks_.size()); }
  // Self time of events[i]: its duration minus its children's.
  int64_t self_ns(size_t i) const;

  std::string table(const TableOptions& options = {}) const;
  // {"traceEvents": [...]}: "X" events with ts/dur in microseconds (ns precision), "M" thread
  // names, "C" live bytes per device, "i" step marks; with ceilings, kernels carry the roofline
  // columns as args. Throws mdl::Error naming the path on failure.
  void export_chrome_trace(const std::string& path, const RooflineOptions& roofline = {}) const;
  // The kernels (CPU kernels by self time, GPU kernels by device time) summed by name and device
  // against their roofline limits, by time spent, largest first; empty without ceilings.
  std::vector<KernelRoofline> kernel_roofline(const RooflineOptions& roofline) const;
  // The limit events[i] is held to and the time measured against it (null when it has none: not a
  // kernel, a GPU kernel's launch, neither FLOPs nor bytes known, or no ceilings for its device).
  std::optional<Limit> roofline_limit(size_t i, const RooflineOptions& roofline, int64_t* time_ns = nullptr) const;

 private:
  void require_stopped(const char* what) const;
  void add_device_events();
  void link_parents();

  Options options_;
  bool recording_ = false;
  int64_t t0_ns_ = 0, duration_ns_ = 0;
  std::vector<int64_t> step_marks_;
  std::vector<Event> events_;
  std::vector<MemoryEvent> memory_;
  std::vector<ThreadInfo> threads_;
  std::vector<int64_t> self_ns_;
};

}  // namespace mdl::profiler
