// The optimization switch list (switches/switches.h, generated from switches/list/switches.def):
// unique names, toggles that reach their flags and read back, declared defaults, change hooks,
// errors that name the unknown switch, a benchmark pair and the guide's text for every entry.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "switches/list/toggles.h"
#include "io/json.h"
#include "switches/switches.h"
#include "tensor/error.h"
#include "tensor/sanitizers.h"

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

TEST_CASE("switches: every entry explains itself for docs/OPTIMIZATIONS.md") {
  const std::set<std::string_view> mechanisms = {"fewer bytes",    "wider vectors",     "fewer launches",
                                                 "fewer branches", "less work",         "less precision",
                                                 "overlap",        "fewer allocations", "less memory"};
  for (const switches::Switch& s : switches::all()) {
    CAPTURE(s.name);
    CHECK(mechanisms.count(s.mechanism) == 1);
    CHECK(s.why.size() >= 40);
    CHECK(s.costs.size() >= 40);
    // "file: function"
    const size_t colon = s.where.find(": ");
    REQUIRE(colon != std::string_view::npos);
    CHECK(s.where.substr(0, colon).find('/') != std::string_view::npos);
    CHECK(colon + 2 < s.where.size());
  }
}

TEST_CASE("switches: each toggle starts at its declared default, and its set_by names the generated setter") {
  for (const switches::Switch& s : switches::all()) {
    if (s.kind != switches::Kind::toggle) continue;
    CAPTURE(s.name);
    CHECK(s.set_by == "toggles::set_" + std::string(s.name));
  }
  for (int i = 0; i < toggles::kCount; ++i) {
    const auto t = toggles::Toggle(i);
    const std::string name = toggles::name(t);
    CAPTURE(name);
    const switches::Switch& s = switches::find(name);
    CHECK(s.kind == switches::Kind::toggle);
    // "on (off in AddressSanitizer builds)" is on or off by build; the case below checks it.
    const bool by_build = s.default_value.find("AddressSanitizer") != std::string_view::npos;
    CHECK((by_build || s.default_value.starts_with(toggles::default_value(t) ? "on" : "off")));
  }
  CHECK_FALSE(toggles::default_value(toggles::Toggle::bf16_gemm));
  CHECK_FALSE(toggles::default_value(toggles::Toggle::allow_tf32));
  CHECK_FALSE(toggles::default_value(toggles::Toggle::cudnn_allow_tf32));
  CHECK(toggles::default_value(toggles::Toggle::direct_conv));
  CHECK(toggles::default_value(toggles::Toggle::cpu_block_cache) == !mdl::built_with_address_sanitizer());
  // The tests' process has not flipped these for good.
  CHECK(toggles::direct_conv() == toggles::default_value(toggles::Toggle::direct_conv));
}

TEST_CASE("switches: toggles::Scoped sets a toggle for a scope and restores it") {
  const bool was = toggles::vector_math();
  {
    toggles::Scoped off(toggles::Toggle::vector_math, !was);
    CHECK(toggles::vector_math() == !was);
    CHECK(switches::get("vector_math") == !was);
  }
  CHECK(toggles::vector_math() == was);
}

namespace {
int g_hook_calls = 0;
bool g_hook_last = false;
}  // namespace

TEST_CASE("switches: a change hook runs after the flag is stored, on every set") {
  // bf16_gemm has no hook of its own; restore the empty slot afterwards.
  toggles::on_change(toggles::Toggle::bf16_gemm, [](bool on) {
    ++g_hook_calls;
    g_hook_last = on;
    CHECK(toggles::bf16_gemm() == on);
  });
  const bool was = toggles::bf16_gemm();
  g_hook_calls = 0;
  toggles::set_bf16_gemm(!was);
  switches::set("bf16_gemm", was);
  toggles::on_change(toggles::Toggle::bf16_gemm, nullptr);
  toggles::set_bf16_gemm(was);
  CHECK(g_hook_calls == 2);
  CHECK(g_hook_last == was);
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
  CHECK_FALSE(toggles::tiled_transpose());
  switches::set("tiled_transpose", true);
  CHECK(toggles::tiled_transpose());
  switches::set("max_pool_vectorized", false);
  CHECK_FALSE(toggles::max_pool_vectorized());
  switches::set("max_pool_vectorized", true);
  CHECK(toggles::max_pool_vectorized());
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
