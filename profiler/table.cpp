// Session::table(): per (name, kind, device[, shapes]) calls, total and self time (an event
// inside one of the same name and kind adds to calls and self time, not again to the total), their share
// of the session, mean time, GFLOP/s where the op knows its FLOPs and bytes moved; then the
// step breakdown by phase and the allocator totals per device.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string_view>

#include "profiler/session.h"

namespace mdl::profiler {

namespace {

struct Row {
  std::string name, kind, device, shapes;
  int64_t calls = 0, total_ns = 0, self_ns = 0, flops = 0, bytes = 0;
  bool flops_known = true;
};

std::string device_label(const Event& e) {
  std::string d = e.device.str();
  return e.kind == EventKind::Kernel && e.device.is_cuda() ? d + " launch" : d;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Columns padded to their widest cell; text columns (left[c]) left-aligned, numbers right.
std::string format_rows(const std::vector<std::vector<std::string>>& cells, const std::vector<bool>& left = {true}) {
  std::vector<size_t> width(cells[0].size(), 0);
  for (auto& r : cells)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::ostringstream s;
  auto rule = [&] {
    size_t n = 0;
    for (size_t w : width) n += w + 2;
    s << std::string(n, '-') << "\n";
  };
  for (size_t i = 0; i < cells.size(); ++i) {
    for (size_t c = 0; c < cells[i].size(); ++c) {
      const std::string& v = cells[i][c];
      std::string pad(width[c] - v.size(), ' ');
      s << (c < left.size() && left[c] ? v + pad : pad + v) << "  ";
    }
    s << "\n";
    if (i == 0) rule();
  }
  rule();
  return s.str();
}

}  // namespace

std::string Session::table(const TableOptions& options) const {
  require_stopped("table()");
  const double wall = double(std::max<int64_t>(duration_ns_, 1));
  auto inside_same = [&](size_t i) {
    for (int32_t p = events_[i].parent; p >= 0; p = events_[size_t(p)].parent)
      if (events_[size_t(p)].kind == events_[i].kind && std::string_view(events_[size_t(p)].name) == events_[i].name)
        return true;
    return false;
  };
  std::map<std::tuple<std::string, int, std::string, std::string>, Row> rows;
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (e.kind == EventKind::Phase) continue;
    std::string shapes = options.group_by_shape ? e.shapes_str() : "";
    std::string device = device_label(e);
    Row& r = rows[{e.name, int(e.kind), device, shapes}];
    if (r.calls == 0) r = {e.name, kind_name(e.kind), device, shapes};
    ++r.calls;
    if (!inside_same(i)) r.total_ns += e.dur_ns();  // a Sequential inside a Sequential counts once
    r.self_ns += self_ns_[i];
    r.bytes += e.bytes;
    if (e.flops < 0) r.flops_known = false;
    else r.flops += e.flops;
  }
  std::vector<Row> sorted;
  for (auto& [k, r] : rows) sorted.push_back(r);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Row& a, const Row& b) {
    switch (options.sort_by) {
      case SortBy::Self: return a.self_ns > b.self_ns;
      case SortBy::Calls: return a.calls > b.calls;
      case SortBy::Name: return a.name < b.name;
      case SortBy::Total: break;
    }
    return a.total_ns > b.total_ns;
  });
  if (options.row_limit > 0 && sorted.size() > size_t(options.row_limit)) sorted.resize(size_t(options.row_limit));

  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> head = {"Name",    "Kind",   "Device",  "Calls",   "Total ms", "Total %",
                                   "Self ms", "Self %", "Mean us", "GFLOP/s", "MB moved"};
  if (options.group_by_shape) head.push_back("Shapes");
  cells.push_back(head);
  for (const Row& r : sorted) {
    std::vector<std::string> c = {
        r.name,
        r.kind,
        r.device,
        std::to_string(r.calls),
        fixed(double(r.total_ns) / 1e6, 3),
        fixed(100.0 * double(r.total_ns) / wall, 1),
        fixed(double(r.self_ns) / 1e6, 3),
        fixed(100.0 * double(r.self_ns) / wall, 1),
        fixed(double(r.total_ns) / 1e3 / double(r.calls), 1),
        r.flops_known && r.flops > 0 && r.self_ns > 0 ? fixed(double(r.flops) / double(r.self_ns), 2) : "",
        r.bytes ? fixed(double(r.bytes) / 1e6, 2) : ""};
    if (options.group_by_shape) c.push_back(r.shapes);
    cells.push_back(c);
  }
  std::ostringstream s;
  s << format_rows(cells, {true, true, true, false, false, false, false, false, false, false, false, true});

  // Step breakdown: top-level phases (not inside another phase), the rest is "other".
  std::vector<std::pair<std::string, int64_t>> phases = {{kDataWait, 0},
                                                         {kForward, 0},
                                                         {kBackward, 0},
                                                         {kOptimizer, 0}};
  int64_t in_phases = 0;
  for (const Event& e : events_) {
    if (e.kind != EventKind::Phase) continue;
    bool nested = false;
    for (int32_t p = e.parent; p >= 0 && !nested; p = events_[size_t(p)].parent)
      nested = events_[size_t(p)].kind == EventKind::Phase;
    if (nested) continue;
    auto it = std::find_if(phases.begin(), phases.end(), [&](auto& p) { return p.first == e.name; });
    if (it == phases.end()) it = phases.insert(phases.end(), {e.name, 0});
    it->second += e.dur_ns();
    in_phases += e.dur_ns();
  }
  phases.push_back({"other", std::max<int64_t>(duration_ns_ - in_phases, 0)});
  const double per = double(std::max<int64_t>(steps(), 1));
  std::vector<std::vector<std::string>> steps_table = {
      {steps() ? "Step breakdown (" + std::to_string(steps()) + " steps, mean per step)"
               : "Step breakdown (whole session)",
       "ms", "%"}};
  for (auto& [name, ns] : phases)
    steps_table.push_back({name, fixed(double(ns) / 1e6 / per, 3), fixed(100.0 * double(ns) / wall, 1)});
  steps_table.push_back({"total", fixed(double(duration_ns_) / 1e6 / per, 3), "100.0"});
  s << "\n" << format_rows(steps_table);

  const std::vector<MemorySummary> memory = memory_summary();
  if (!memory.empty()) {
    std::vector<std::vector<std::string>> mem = {
        {"Memory", "allocated MB", "freed MB", "allocs", "frees", "peak live MB", "live at end MB"}};
    for (const MemorySummary& m : memory)
      mem.push_back({m.device.str(), fixed(double(m.allocated_bytes) / 1e6, 2), fixed(double(m.freed_bytes) / 1e6, 2),
                     std::to_string(m.allocations), std::to_string(m.frees), fixed(double(m.peak_live) / 1e6, 2),
                     fixed(double(m.end_live) / 1e6, 2)});
    s << "\n" << format_rows(mem);
  }
  return s.str();
}

}  // namespace mdl::profiler
