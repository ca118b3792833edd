// Every optimization switch in one list, generated from switches/list/switches.def: what it changes,
// its default, the device it acts on, how it is set, the benchmark pair that measures it, and the
// learner's guide text (docs/OPTIMIZATIONS.md). A toggle is process-wide state
// (switches/list/toggles.h) and can be flipped here by name:
//
//   switches::set("tiled_transpose", false);   // calls toggles::set_tiled_transpose(false)
//   for (const auto& s : switches::all()) ...
//
// An option is chosen per run (an mdl-train flag or an API), so it has no set/get here; its entry
// says what sets it. Each benchmark pair runs in one suite as <name>/off/<case> against
// <name>/on/<case> (bench_name()), so bench/summary.py builds its rows from this list.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mdl::switches {

enum class Kind { toggle, option };
const char* kind_name(Kind k);  // "toggle", "option"

// A benchmark pair: `suite` (a bench binary) runs bench_name(switch, false, case_name) against
// bench_name(switch, true, case_name) and reports `metric` for both.
struct BenchPair {
  std::string_view suite;      // "bench_conv"
  std::string_view case_name;  // what the pair runs on, e.g. "fwd/depthwise_3x3_c128_32x32_b32"
  std::string_view metric;     // "time" (real time), or the counter compared: "peak_MB", "ms/epoch", "TFLOP/s"
  std::string_view device;     // "cpu" or "cuda": where the pair runs
};

struct Switch {
  std::string_view name;  // short, stable, snake_case
  Kind kind;
  std::string_view set_by;         // toggle: its C++ setter; option: the mdl-train flag or the API
  std::string_view default_value;  // "on", "off", or the option's default
  std::string_view device;         // what it acts on: "cpu", "cuda" or "cpu, cuda"
  std::string_view changes;        // one sentence
  std::vector<BenchPair> benches;  // at least one; the first is the headline figure
  std::string_view mechanism;      // why it pays, in two words: "fewer bytes", "wider vectors", ...
  std::string_view why;            // the mechanism explained
  std::string_view where;          // "file: function" where the switch takes effect
  std::string_view costs;          // when it does not pay, and why
  void (*set)(bool on) = nullptr;  // toggles only
  bool (*get)() = nullptr;
};

// In a fixed order: toggles, then options.
const std::vector<Switch>& all();
// The entry named `name`; throws mdl::Error naming it (and listing the known names) when there is none.
const Switch& find(std::string_view name);
// Flips a toggle by name; an option throws mdl::Error saying what sets it.
void set(std::string_view name, bool on);
bool get(std::string_view name);

// "<name>/off/<case>" or "<name>/on/<case>" ("<name>/off" with no case). Throws for an unknown name.
std::string bench_name(std::string_view name, bool on, std::string_view case_name = {});

// The list as a JSON array of objects (name, kind, set_by, default, device, changes, benches,
// mechanism, why, where, costs), for
// the benchmark suites' output and bench/summary.py.
std::string to_json();

}  // namespace mdl::switches
