// The optimization switch list (switches/switches.h): unique names, toggles that reach their real
// setters and read back, errors that name the unknown switch, and a benchmark pair for every entry.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "cpu/copy_options.h"
#include "cpu/pool.h"
#include "io/json.h"
#include "switches/switches.h"
#include "tensor/error.h"

using namespace mdl;

TEST_CASE("switches: names are unique snake_case, toggles first, each with its fields") {
  std::set<std::string> names;
  bool seen_option = false;
  for (const switches::Switch& s : switches::all()) {
    CAPTURE(s.name);
    CHECK(names.insert(std::string(s.name)).second);
    CHECK(!s.name.empty());
    CHECK(s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos);
    CHECK(!s.set_by.empty());
    CHECK(!s.default_value.empty());
    CHECK(!s.changes.empty());
    CHECK((s.device == "cpu" || s.device == "cuda" || s.device == "cpu, cuda"));
    const bool toggle = s.kind == switches::Kind::toggle;
    CHECK(toggle == (s.set != nullptr));
    CHECK(toggle == (s.get != nullptr));
    if (!toggle) seen_option = true;
    else CHECK_FALSE(seen_option);
  }
  CHECK(names.size() >= 7);
}

TEST_CASE("switches: every entry names a benchmark pair") {
  for (const switches::Switch& s : switches::all()) {
    CAPTURE(s.name);
    REQUIRE(!s.benches.empty());
    for (const switches::BenchPair& b : s.benches) {
      CHECK(b.suite.starts_with("bench_"));
      CHECK(!b.metric.empty());
      CHECK((b.device == "cpu" || b.device == "cuda"));
      CHECK(s.device.find(b.device) != std::string_view::npos);
    }
  }
  CHECK(switches::bench_name("tiled_transpose", false, "f32_4096x4096") == "tiled_transpose/off/f32_4096x4096");
  CHECK(switches::bench_name("tiled_transpose", true) == "tiled_transpose/on");
}

TEST_CASE("switches: every toggle's set and get round-trip through its real functions, and restore") {
  for (const switches::Switch& s : switches::all()) {
    if (s.kind != switches::Kind::toggle) continue;
    CAPTURE(s.name);
    const bool was = switches::get(s.name);
    CHECK(was == s.get());
    for (bool on : {!was, was}) {
      switches::set(s.name, on);
      CHECK(switches::get(s.name) == on);
      CHECK(s.get() == on);
    }
    CHECK(switches::get(s.name) == was);
  }
  // By name, the backends' own getters see the change.
  switches::set("tiled_transpose", false);
  CHECK_FALSE(cpu::tiled_transpose());
  switches::set("tiled_transpose", true);
  CHECK(cpu::tiled_transpose());
  switches::set("max_pool_vectorized", false);
  CHECK_FALSE(cpu::max_pool_vectorized());
  switches::set("max_pool_vectorized", true);
  CHECK(cpu::max_pool_vectorized());
}

TEST_CASE("switches: an unknown name or an option given to set/get is an mdl::Error naming it") {
  CHECK_THROWS_WITH_AS(switches::set("tiled_transposes", false),
                       doctest::Contains("no switch named 'tiled_transposes'"), Error);
  CHECK_THROWS_WITH_AS(switches::get("nope"), doctest::Contains("no switch named 'nope'"), Error);
  CHECK_THROWS_WITH_AS(switches::find(""), doctest::Contains("known: depthwise_direct"), Error);
  CHECK_THROWS_WITH_AS(switches::bench_name("fused_adam", true), doctest::Contains("'fused_adam'"), Error);
  CHECK_THROWS_WITH_AS(switches::set("prefetch", true),
                       doctest::Contains("per-run option, set by mdl-train --prefetch"), Error);
  CHECK_THROWS_WITH_AS(switches::get("autocast"), doctest::Contains("'autocast' is a per-run option"), Error);
}

TEST_CASE("switches: the JSON list holds every entry with its pairs' benchmark names") {
  const io::json::Value list = io::json::parse(switches::to_json());
  REQUIRE(list.is_array());
  REQUIRE(list.items.size() == switches::all().size());
  const io::json::Value& first = list.items[0];
  REQUIRE(first.find("name"));
  CHECK(first.find("name")->str == std::string(switches::all()[0].name));
  CHECK(first.find("kind")->str == "toggle");
  const io::json::Value* benches = first.find("benches");
  REQUIRE(benches);
  REQUIRE(benches->is_array());
  const io::json::Value& pair = benches->items.at(0);
  const switches::BenchPair& b = switches::all()[0].benches[0];
  CHECK(pair.find("off")->str == switches::bench_name(switches::all()[0].name, false, b.case_name));
  CHECK(pair.find("on")->str == switches::bench_name(switches::all()[0].name, true, b.case_name));
  CHECK(pair.find("suite")->str == std::string(b.suite));
}
