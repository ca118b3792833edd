// The profiler's results: memory counters against the allocator's own statistics, the table
// (rows, GFLOP/s, a step breakdown that adds up), and the Chrome trace read back.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/profiler_test_util.h"
#include "tests/support/trace_reader.h"

using namespace mdl;
using namespace profiler_test;


TEST_CASE("profiler: memory counters match the allocator's statistics") {
  reset_peak_memory();
  const MemoryStats before = memory_stats();
  profiler::Session prof({.memory = true});
  Tensor keep = ones({500});
  {
    Tensor a = zeros({1000}), b = zeros({2000});
    Tensor c = a + a;
  }
  Tensor more = full({300}, 2.0);
  prof.stop();
  const MemoryStats after = memory_stats();
  auto summary = prof.memory_summary();
  REQUIRE(summary.size() == 1);
  const profiler::MemorySummary& m = summary[0];
  CHECK(m.device == Device::cpu());
  CHECK(m.allocations == after.allocations - before.allocations);
  CHECK(m.allocated_bytes - m.freed_bytes == after.live_bytes - before.live_bytes);
  CHECK(m.peak_live == after.peak_bytes);
  CHECK(m.end_live == after.live_bytes);
  CHECK(m.allocated_bytes == 4 * (500 + 1000 + 2000 + 1000 + 300));
  CHECK(m.frees == 3);
  // Each counter event's live bytes follow from the one before.
  const auto& events = prof.memory_events();
  REQUIRE(events.size() == size_t(m.allocations + m.frees));
  for (size_t i = 1; i < events.size(); ++i) CHECK(events[i].live == events[i - 1].live + events[i].delta);

  profiler::Session quiet({.memory = false});
  Tensor unseen = zeros({100});
  quiet.stop();
  CHECK(quiet.memory_events().empty());
  CHECK(quiet.memory_summary().empty());
}

TEST_CASE("profiler: the table of a SimpleCNN step: rows, GFLOP/s and a breakdown that adds up") {
  manual_seed(1);
  CnnStep step(4);
  step.run();  // warm-up
  profiler::Session prof({.record_shapes = true});
  for (int i = 0; i < 2; ++i) {
    step.run();
    prof.step();
  }
  prof.stop();
  check_well_formed(prof);
  const std::string t = prof.table();
  // Name Kind Device Calls Total-ms Total-% Self-ms Self-% Mean-us GFLOP/s MB
  auto conv = table_row(t, "conv2d");
  REQUIRE(conv.size() == 11);
  CHECK(conv[1] == "kernel");
  CHECK(conv[3] == "4");  // 2 convs x 2 steps
  CHECK(std::stod(conv[9]) > 0.0);
  auto conv_back = table_row(t, "conv2d_backward");
  REQUIRE(conv_back.size() == 11);
  CHECK(std::stod(conv_back[9]) > 0.0);
  auto fill = table_row(t, "fill");
  REQUIRE(fill.size() >= 10);
  CHECK(fill.size() == 10);  // no GFLOP/s for an op without a FLOP count
  CHECK(t.find("Step breakdown (2 steps, mean per step)") != std::string::npos);
  // The phases and "other" add up to the total.
  double sum = 0;
  for (const char* p : {"data_wait", "forward", "backward", "optimizer", "other"}) {
    auto r = table_row(t, p);
    REQUIRE(r.size() == 3);
    sum += std::stod(r[1]);
  }
  CHECK(std::stod(table_row(t, "forward")[1]) > 0.0);
  CHECK(std::stod(table_row(t, "data_wait")[1]) == 0.0);
  auto total = table_row(t, "total");
  REQUIRE(total.size() == 3);
  CHECK(std::fabs(sum - std::stod(total[1])) < 0.01);
  CHECK(std::fabs(std::stod(total[1]) - double(prof.duration_ns()) / 2e6) < 0.001);
  CHECK(table_row(t, "cpu").size() == 7);  // the memory section

  // Nested Sequentials (model, features, classifier) count once in the total.
  auto seq = table_row(t, "Sequential");
  REQUIRE(seq.size() >= 6);
  CHECK(std::stod(seq[5]) <= 100.0);

  const std::string by_shape = prof.table({.sort_by = profiler::SortBy::Calls, .group_by_shape = true});
  CHECK(by_shape.find("Shapes") != std::string::npos);
  CHECK(by_shape.find("f32[4, 32, 28, 28], f32[4, 1, 28, 28], f32[32, 1, 3, 3], f32[32]") != std::string::npos);
  // row_limit keeps the first rows: header, rule, 3 rows, rule, then the breakdown.
  const std::string limited = prof.table({.row_limit = 3});
  const std::string first_table = limited.substr(0, limited.find("\n\n") + 1);
  CHECK(std::count(first_table.begin(), first_table.end(), '\n') == 6);
}

TEST_CASE("profiler: the Chrome trace parses and its events nest and add up") {
  CnnStep step(2);
  profiler::Session prof({.record_shapes = true});
  step.run();
  prof.step();
  prof.stop();
  const std::string path = (std::filesystem::temp_directory_path() / "mdl_profiler_trace_test.json").string();
  prof.export_chrome_trace(path);
  const trace_reader::Value doc = trace_reader::parse(read_text(path));
  std::filesystem::remove(path);
  REQUIRE(doc.kind == trace_reader::Value::Object);
  const trace_reader::Value* events = doc.find("traceEvents");
  REQUIRE(events);
  REQUIRE(events->kind == trace_reader::Value::Array);

  struct X {
    double ts, dur;
  };
  std::map<int, std::vector<X>> by_tid;
  std::map<int, std::string> thread_names;
  size_t complete = 0, counters = 0, steps = 0;
  double last_live = -1;
  for (const auto& e : events->items) {
    const std::string ph = e.find("ph")->str;
    if (ph == "X") {
      ++complete;
      REQUIRE(e.find("name")->kind == trace_reader::Value::String);
      double ts = e.find("ts")->number, dur = e.find("dur")->number;
      CHECK(ts >= 0);
      CHECK(dur >= 0);
      by_tid[int(e.find("tid")->number)].push_back({ts, dur});
    } else if (ph == "M" && e.find("name")->str == "thread_name") {
      thread_names[int(e.find("tid")->number)] = e.find("args")->find("name")->str;
    } else if (ph == "C") {
      ++counters;
      CHECK(e.find("name")->str == "memory cpu");
      last_live = e.find("args")->find("live_bytes")->number;
    } else if (ph == "i") {
      ++steps;
    }
  }
  CHECK(complete == prof.events().size());
  CHECK(counters == prof.memory_events().size());
  CHECK(last_live == double(prof.memory_events().back().live));
  CHECK(steps == 1);
  CHECK(thread_names[0] == "main");
  // Per thread, as a stack: every event inside the one still open, children's time within.
  for (auto& [tid, xs] : by_tid) {
    CHECK(thread_names.count(tid) == 1);
    std::vector<std::pair<X, double>> open;  // event, children's total
    for (const X& x : xs) {
      while (!open.empty() && open.back().first.ts + open.back().first.dur <= x.ts + 1e-9) {
        CHECK(open.back().second <= open.back().first.dur + 1e-6);
        open.pop_back();
      }
      if (!open.empty()) {
        CHECK(x.ts + x.dur <= open.back().first.ts + open.back().first.dur + 1e-6);
        open.back().second += x.dur;
      }
      open.push_back({x, 0.0});
    }
  }
  // The step's phases lie within the session.
  double phases = 0;
  for (const Event& e : prof.events())
    if (e.kind == EventKind::Phase) phases += double(e.dur_ns());
  CHECK(phases > 0);
  CHECK(phases <= double(prof.duration_ns()));
}
