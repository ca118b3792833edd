// The catalogue of optimization switches, generated from switches/list/switches.def: each toggle
// wired to its generated setter and getter, each per-run option with what sets it.
#include "switches/switches.h"

#include "io/json.h"
#include "switches/list/toggles.h"
#include "tensor/error.h"

namespace mdl::switches {

namespace {

// "on_unless_asan" reads better spelled out.
constexpr std::string_view default_text(std::string_view declared) {
  return declared == "on_unless_asan" ? "on (off in AddressSanitizer builds)" : declared;
}

#define B(suite, case_name, metric, device) \
  BenchPair { suite, case_name, metric, device }
#define MDL_UNPAREN(...) __VA_ARGS__

std::vector<Switch> make_list() {
  return {
#define MDL_TOGGLE(id, dflt, device, changes, benches, mechanism, why, where, costs) \
  Switch{#id,                                                                        \
         Kind::toggle,                                                               \
         "toggles::set_" #id,                                                        \
         default_text(#dflt),                                                        \
         device,                                                                     \
         changes,                                                                    \
         {MDL_UNPAREN benches},                                                      \
         mechanism,                                                                  \
         why,                                                                        \
         where,                                                                      \
         costs,                                                                      \
         toggles::set_##id,                                                          \
         toggles::id},
#define MDL_OPTION(id, set_by, dflt, device, changes, benches, mechanism, why, where, costs) \
  Switch{#id, Kind::option, set_by, dflt, device, changes, {MDL_UNPAREN benches}, mechanism, why, where, costs},
#include "switches/list/switches.def"
#undef MDL_TOGGLE
#undef MDL_OPTION
  };
}

#undef B
#undef MDL_UNPAREN

io::json::Value str(std::string_view s) { return io::json::Value::make_string(std::string(s)); }

}  // namespace

const char* kind_name(Kind k) { return k == Kind::toggle ? "toggle" : "option"; }

const std::vector<Switch>& all() {
  static const std::vector<Switch> list = make_list();
  return list;
}

const Switch& find(std::string_view name) {
  std::string known;
  for (const Switch& s : all()) {
    if (s.name == name) return s;
    known.append(known.empty() ? "" : ", ").append(s.name);
  }
  MDL_FAIL("switches: no switch named '", name, "' (known: ", known, ")");
}

void set(std::string_view name, bool on) {
  const Switch& s = find(name);
  MDL_CHECK(s.kind == Kind::toggle, "switches::set: '", name, "' is a per-run option, set by ", s.set_by);
  s.set(on);
}

bool get(std::string_view name) {
  const Switch& s = find(name);
  MDL_CHECK(s.kind == Kind::toggle, "switches::get: '", name, "' is a per-run option, set by ", s.set_by);
  return s.get();
}

std::string bench_name(std::string_view name, bool on, std::string_view case_name) {
  std::string out(find(name).name);
  out.append(on ? "/on" : "/off");
  if (!case_name.empty()) out.append("/").append(case_name);
  return out;
}

std::string to_json() {
  using io::json::Value;
  Value list = Value::make_array();
  for (const Switch& s : all()) {
    Value benches = Value::make_array();
    for (const BenchPair& b : s.benches) {
      Value pair = Value::make_object();
      pair.add("suite", str(b.suite));
      pair.add("case", str(b.case_name));
      pair.add("off", str(bench_name(s.name, false, b.case_name)));
      pair.add("on", str(bench_name(s.name, true, b.case_name)));
      pair.add("metric", str(b.metric));
      pair.add("device", str(b.device));
      benches.push(std::move(pair));
    }
    Value entry = Value::make_object();
    entry.add("name", str(s.name));
    entry.add("kind", str(kind_name(s.kind)));
    entry.add("set_by", str(s.set_by));
    entry.add("default", str(s.default_value));
    entry.add("device", str(s.device));
    entry.add("changes", str(s.changes));
    entry.add("mechanism", str(s.mechanism));
    entry.add("why", str(s.why));
    entry.add("where", str(s.where));
    entry.add("costs", str(s.costs));
    entry.add("benches", std::move(benches));
    list.push(std::move(entry));
  }
  return io::json::dump(list);
}

}  // namespace mdl::switches
