// Named ranges in user code and the phases of a training step, recorded by an active
// profiler::Session (one branch each when none is). Phases feed the table's step breakdown:
//   { profiler::Phase p("forward"); loss = loss_fn(model(x), y); }
#pragma once
#include <string>
#include <string_view>

namespace mdl::profiler {

// The step phases the breakdown knows; any other name gets its own line.
inline constexpr const char* kDataWait = "data_wait";
inline constexpr const char* kForward = "forward";
inline constexpr const char* kBackward = "backward";
inline constexpr const char* kOptimizer = "optimizer";

class Scope {
 public:
  explicit Scope(std::string_view name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 protected:
  struct AsPhase {};
  Scope(std::string_view name, AsPhase);

 private:
  bool open_ = false;
};

class Phase : public Scope {
 public:
  explicit Phase(std::string_view name) : Scope(name, AsPhase{}) {}
};

// Names the calling thread's track in the trace ("loader worker 0"); default "main" for the
// first thread seen by a session, "thread N" for the others.
void set_thread_name(std::string name);

}  // namespace mdl::profiler
