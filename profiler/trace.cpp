// Session::export_chrome_trace(): the Chrome Trace Event format, which chrome://tracing and
// ui.perfetto.dev open. Times are microseconds written with three decimals (ns precision).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "io/json.h"
#include "profiler/session.h"
#include "tensor/error.h"

namespace mdl::profiler {

namespace {

constexpr int kPid = 1;

// ns as microseconds with three decimals, without going through a double.
std::string micros(int64_t ns) {
  char buf[32];
  const long long magnitude = ns < 0 ? -ns : ns;
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
  return buf;
}

// A finite double in JSON, six significant digits.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", std::isfinite(v) ? v : 0.0);
  return buf;
}

// The table's roofline columns for events[i], when it is held to a limit.
void roofline_args(std::ostream& s, const Session& session, size_t i, const RooflineOptions& roofline) {
  int64_t time_ns = 0;
  const std::optional<Limit> limit = session.roofline_limit(i, roofline, &time_ns);
  if (!limit || time_ns <= 0) return;
  const Event& e = session.events()[i];
  RoofSum r;
  r.add(e.flops, e.bytes, time_ns, *limit);
  if (!std::isnan(r.intensity())) s << ",\"flop_per_byte\":" << number(r.intensity());
  s << ",\"gb_per_s\":" << number(r.achieved_gbs()) << ",\"bound\":\"" << (r.compute_bound() ? "compute" : "memory")
    << "\",\"pct_of_bound\":" << number(r.percent_of_bound()) << ",\"headroom_us\":" << number(r.headroom_ns() / 1e3);
}

}  // namespace

void Session::export_chrome_trace(const std::string& path, const RooflineOptions& roofline) const {
  require_stopped("export_chrome_trace()");
  using io::json::quote;
  std::ostringstream s;
  s << "{\"traceEvents\":[\n";
  s << "{\"ph\":\"M\",\"pid\":" << kPid << ",\"name\":\"process_name\",\"args\":{\"name\":\"mdl\"}}";
  for (const ThreadInfo& t : threads_) {
    s << ",\n{\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << t.tid
      << ",\"name\":\"thread_name\",\"args\":{\"name\":" << quote(t.name) << "}}";
    s << ",\n{\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << t.tid
      << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" << t.tid << "}}";
  }
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    s << ",\n{\"ph\":\"X\",\"pid\":" << kPid << ",\"tid\":" << e.tid << ",\"name\":" << quote(e.name) << ",\"cat\":\""
      << kind_name(e.kind) << "\",\"ts\":" << micros(e.start_ns) << ",\"dur\":" << micros(e.dur_ns())
      << ",\"args\":{\"device\":\"" << e.device.str() << "\"";
    if (e.n_shapes) s << ",\"shapes\":" << quote(e.shapes_str());
    if (e.flops >= 0) s << ",\"flops\":" << e.flops;
    if (e.bytes) s << ",\"bytes\":" << e.bytes;
    roofline_args(s, *this, i, roofline);
    s << "}}";
  }
  for (const MemoryEvent& m : memory_)
    s << ",\n{\"ph\":\"C\",\"pid\":" << kPid << ",\"name\":\"memory " << m.device.str()
      << "\",\"ts\":" << micros(m.t_ns) << ",\"args\":{\"live_bytes\":" << m.live << "}}";
  for (size_t i = 0; i < step_marks_.size(); ++i)
    s << ",\n{\"ph\":\"i\",\"s\":\"g\",\"pid\":" << kPid << ",\"tid\":0,\"name\":\"step " << i + 1
      << "\",\"ts\":" << micros(step_marks_[i]) << "}";
  s << "\n],\"displayTimeUnit\":\"ms\"}\n";

  std::ofstream f(path, std::ios::binary);
  MDL_CHECK(f, "export_chrome_trace: cannot open '", path, "' for writing");
  const std::string text = s.str();
  f.write(text.data(), std::streamsize(text.size()));
  f.close();
  MDL_CHECK(f, "export_chrome_trace: writing '", path, "' failed");
}

}  // namespace mdl::profiler
