// Session::table(): per (name, kind, device[, shapes]) calls, total and self time (an event
// inside one of the same name and kind adds to calls and self time, not again to the total), their share
// of the session, mean time, GFLOP/s where the op knows its FLOPs and bytes moved; with ceilings, the
// roofline columns of each kernel row; then the step breakdown by phase and the allocator totals per device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string_view>

#include "profiler/session.h"
#include "tensor/error.h"

namespace mdl::profiler {

namespace {

struct Row {
  std::string name, kind, device, shapes;
  int64_t calls = 0, total_ns = 0, self_ns = 0, flops = 0, bytes = 0;
  int64_t call_ns = 0;  // every call's duration, nested ones too: the mean's numerator
  bool flops_known = true;
  RoofSum roof;  // the calls held to a roofline limit
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

// Intensity, GB/s, binding limit, % of the bound and headroom ms per step; blank without a limit.
std::vector<std::string> roofline_cells(const RoofSum& r, double steps) {
  if (!r.has_limit() || r.time_ns <= 0) return {"", "", "", "", ""};
  const double intensity = r.intensity();
  return {std::isnan(intensity) ? "" : fixed(intensity, intensity < 10 ? 3 : 1), fixed(r.achieved_gbs(), 2),
          r.compute_bound() ? "compute" : "memory", fixed(r.percent_of_bound(), 1),
          fixed(r.headroom_ns() / 1e6 / steps, 3)};
}

// The ceilings the roofline columns used, one line each.
// used: by "CPU <compute>" or "GPU <compute>".
std::string roofline_note(const RooflineOptions& o, const std::map<std::string, Limit>& used) {
  std::string note =
      "Roofline: % of bound = the time the ceilings allow (max(FLOPs / peak, bytes / bandwidth)) over the "
      "time taken; headroom = the time above it.\n";
  for (const auto& [key, l] : used)
    note += "  " + key.substr(0, 3) + ": " + l.compute + " " + fixed(l.peak_gflops, 1) + " GFLOP/s, " + l.memory + " " +
            fixed(l.bandwidth_gbs, 1) + " GB/s, ridge " + fixed(l.ridge(), 2) + " FLOP/B; ceilings measured " +
            o.ceilings->date + "\n";
  return note;
}

}  // namespace

std::string Session::table(const TableOptions& options) const {
  require_stopped("table()");
  const bool roofline = options.roofline.ceilings != nullptr;
  MDL_CHECK(roofline || options.sort_by != SortBy::Headroom,
            "profiler: sorting the table by headroom needs the roofline's ceilings (TableOptions::roofline)");
  MDL_CHECK(!options.group_by_shape || options_.record_shapes,
            "profiler: grouping the table by shape needs a session that records shapes (Options::record_shapes)");
  const double steps_or_one = double(std::max<int64_t>(steps(), 1));
  const double wall = double(std::max<int64_t>(duration_ns_, 1));
  auto inside_same = [&](size_t i) {
    for (int32_t p = events_[i].parent; p >= 0; p = events_[size_t(p)].parent)
      if (events_[size_t(p)].kind == events_[i].kind && std::string_view(events_[size_t(p)].name) == events_[i].name)
        return true;
    return false;
  };
  std::map<std::tuple<std::string, int, std::string, std::string>, Row> rows;
  std::map<std::string, Limit> limits_used;  // by device and compute ceiling
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (e.kind == EventKind::Phase) continue;
    std::string shapes = options.group_by_shape ? e.shapes_str() : "";
    std::string device = device_label(e);
    Row& r = rows[{e.name, int(e.kind), device, shapes}];
    if (r.calls == 0) r.name = e.name, r.kind = kind_name(e.kind), r.device = device, r.shapes = shapes;
    ++r.calls;
    r.call_ns += e.dur_ns();
    if (!inside_same(i)) r.total_ns += e.dur_ns();  // a Sequential inside a Sequential counts once
    r.self_ns += self_ns_[i];
    r.bytes += e.bytes;
    if (e.flops < 0) r.flops_known = false;
    else r.flops += e.flops;
    int64_t time_ns = 0;
    if (roofline)
      if (const std::optional<Limit> limit = roofline_limit(i, options.roofline, &time_ns)) {
        r.roof.add(e.flops, e.bytes, time_ns, *limit);
        limits_used.emplace(std::string(e.device.is_cpu() ? "CPU" : "GPU") + " " + limit->compute, *limit);
      }
  }
  std::vector<Row> sorted;
  for (auto& [k, r] : rows) sorted.push_back(r);
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Row& a, const Row& b) {
    switch (options.sort_by) {
      case SortBy::Self: return a.self_ns > b.self_ns;
      case SortBy::Calls: return a.calls > b.calls;
      case SortBy::Name: return a.name < b.name;
      case SortBy::Headroom: return a.roof.headroom_ns() > b.roof.headroom_ns();
      case SortBy::Total: break;
    }
    return a.total_ns > b.total_ns;
  });
  if (options.row_limit > 0 && sorted.size() > size_t(options.row_limit)) sorted.resize(size_t(options.row_limit));

  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> head = {"Name",    "Kind",   "Device",  "Calls",   "Total ms", "Total %",
                                   "Self ms", "Self %", "Mean us", "GFLOP/s", "MB moved"};
  if (roofline)
    for (const char* h : {"FLOP/B", "GB/s", "Bound", "% of bound", steps() ? "Headroom ms/step" : "Headroom ms"})
      head.push_back(h);
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
        fixed(double(r.call_ns) / 1e3 / double(r.calls), 1),
        r.flops_known && r.flops > 0 && r.self_ns > 0 ? fixed(double(r.flops) / double(r.self_ns), 2) : "",
        r.bytes ? fixed(double(r.bytes) / 1e6, 2) : ""};
    if (roofline)
      for (std::string& cell : roofline_cells(r.roof, steps_or_one)) c.push_back(std::move(cell));
    if (options.group_by_shape) c.push_back(r.shapes);
    cells.push_back(c);
  }
  std::vector<bool> left = {true, true, true, false, false, false, false, false, false, false, false};
  if (roofline) left.insert(left.end(), {false, false, true, false, false});
  left.push_back(true);  // shapes
  std::ostringstream s;
  s << format_rows(cells, left);
  if (roofline) s << roofline_note(options.roofline, limits_used);

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
  const double per = steps_or_one;
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
