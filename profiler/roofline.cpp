// The ceilings file (JSON, rates as integer MFLOP/s and MB/s), its checks, mdl-roofline's table and
// the bound arithmetic of profiler/roofline.h.
#include "profiler/roofline.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/json.h"
#include "tensor/error.h"

namespace mdl::profiler {

namespace {

constexpr const char* kFormat = "mdl-roofline 1";
using io::json::Value;

Value mega(double rate) { return Value::make_uint(uint64_t(std::llround(std::max(rate, 0.0) * 1000))); }

Value rates_json(const std::vector<Rate>& rates) {
  Value o = Value::make_object();
  for (const Rate& r : rates) o.add(r.name, mega(r.value));
  return o;
}

// Reads members by name, each failure naming the file and the key.
class Reader {
 public:
  explicit Reader(std::string_view context) : context_(context) {}
  const Value& member(const Value& object, const std::string& key, Value::Kind kind, const std::string& where) const {
    const Value* v = object.find(key);
    MDL_CHECK(v, context_, ": not a roofline ceilings file: '", where + key, "' is missing (",
              "mdl-roofline --refresh writes a new one)");
    Value wanted;
    wanted.kind = kind;
    MDL_CHECK(v->kind == kind, context_, ": not a roofline ceilings file: '", where + key, "' is ", v->kind_name(),
              ", not ", wanted.kind_name());
    return *v;
  }
  double rate(const Value& object, const std::string& key, const std::string& where) const {
    return rate_of(member(object, key, Value::Kind::Int, where), where + key);
  }
  double rate_of(const Value& v, const std::string& key) const {
    MDL_CHECK(v.is_uint() && v.magnitude < (uint64_t(1) << 50), context_, ": '", key,
              "' must be a rate in MFLOP/s or MB/s (a non-negative integer)");
    return double(v.magnitude) / 1000;
  }
  std::vector<Rate> rates(const Value& object, const std::string& key, const std::string& where) const {
    const Value& o = member(object, key, Value::Kind::Object, where);
    std::vector<Rate> out;
    for (size_t i = 0; i < o.keys.size(); ++i)
      out.push_back({o.keys[i], rate_of(o.items[i], where + key + "." + o.keys[i])});
    return out;
  }
  int64_t count(const Value& object, const std::string& key, const std::string& where) const {
    const Value& v = member(object, key, Value::Kind::Int, where);
    MDL_CHECK(v.is_uint() && v.magnitude < (uint64_t(1) << 62), context_, ": '", where + key,
              "' must be a non-negative integer");
    return int64_t(v.magnitude);
  }

 private:
  std::string context_;
};

double max_rate(const std::vector<Rate>& rates) {
  double best = 0;
  for (const Rate& r : rates) best = std::max(best, r.value);
  return best;
}

const Rate* best_rate(const std::vector<Rate>& rates) {
  const Rate* best = nullptr;
  for (const Rate& r : rates)
    if (!best || r.value > best->value) best = &r;
  return best;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string bytes_label(int64_t bytes) {
  if (bytes >= (int64_t(1) << 20)) return fixed(double(bytes) / double(1 << 20), 1) + " MiB";
  return fixed(double(bytes) / 1024, 0) + " KiB";
}

}  // namespace

double CpuCeilings::f32_peak() const { return max_rate(f32_fma); }
double CpuCeilings::bf16_peak() const { return max_rate(bf16_dot); }

std::string ceilings_to_json(const Ceilings& c) {
  Value cpu = Value::make_object();
  cpu.add("model", Value::make_string(c.cpu.model));
  Value flags = Value::make_array();
  for (const std::string& f : c.cpu.flags) flags.push(Value::make_string(f));
  cpu.add("flags", flags);
  cpu.add("threads", Value::make_int(c.cpu.threads));
  cpu.add("f32_fma_mflops", rates_json(c.cpu.f32_fma));
  cpu.add("bf16_dot_mflops", rates_json(c.cpu.bf16_dot));
  cpu.add("memory_mbps", mega(c.cpu.memory_gbs));
  cpu.add("l2_mbps", mega(c.cpu.l2_gbs));
  cpu.add("llc_bytes", Value::make_int(c.cpu.llc_bytes));
  cpu.add("l2_bytes", Value::make_int(c.cpu.l2_bytes));
  Value doc = Value::make_object();
  doc.add("format", Value::make_string(kFormat));
  doc.add("date", Value::make_string(c.date));
  doc.add("measure_ms", Value::make_int(c.measure_ms));
  doc.add("cpu", cpu);
  if (c.gpu.present()) {
    Value gpu = Value::make_object();
    gpu.add("device", Value::make_string(c.gpu.device));
    gpu.add("f16_tensor_mflops", mega(c.gpu.f16_tensor));
    gpu.add("bf16_tensor_mflops", mega(c.gpu.bf16_tensor));
    gpu.add("tf32_tensor_mflops", mega(c.gpu.tf32_tensor));
    gpu.add("f32_mflops", mega(c.gpu.f32));
    gpu.add("memory_mbps", mega(c.gpu.memory_gbs));
    doc.add("gpu", gpu);
  }
  return io::json::dump(doc) + "\n";
}

Ceilings ceilings_from_json(std::string_view text, std::string_view context) {
  const Value doc = io::json::parse(text, context);
  const Reader r(context);
  MDL_CHECK(doc.is_object(), context, ": not a roofline ceilings file: the document is ", doc.kind_name(),
            ", not an object");
  const std::string format = r.member(doc, "format", Value::Kind::String, "").str;
  MDL_CHECK(format == kFormat, context, ": format '", format, "', this mdl reads '", kFormat,
            "' (mdl-roofline --refresh writes a new file)");
  Ceilings c;
  c.date = r.member(doc, "date", Value::Kind::String, "").str;
  c.measure_ms = r.count(doc, "measure_ms", "");
  const Value& cpu = r.member(doc, "cpu", Value::Kind::Object, "");
  c.cpu.model = r.member(cpu, "model", Value::Kind::String, "cpu.").str;
  for (const Value& f : r.member(cpu, "flags", Value::Kind::Array, "cpu.").items) {
    MDL_CHECK(f.is_string(), context, ": 'cpu.flags' holds ", f.kind_name(), ", not only strings");
    c.cpu.flags.push_back(f.str);
  }
  const int64_t threads = r.count(cpu, "threads", "cpu.");
  MDL_CHECK(threads >= 1 && threads <= 65536, context, ": 'cpu.threads' is ", threads, ", not in [1, 65536]");
  c.cpu.threads = int(threads);
  c.cpu.f32_fma = r.rates(cpu, "f32_fma_mflops", "cpu.");
  c.cpu.bf16_dot = r.rates(cpu, "bf16_dot_mflops", "cpu.");
  c.cpu.memory_gbs = r.rate(cpu, "memory_mbps", "cpu.");
  c.cpu.l2_gbs = r.rate(cpu, "l2_mbps", "cpu.");
  c.cpu.llc_bytes = r.count(cpu, "llc_bytes", "cpu.");
  c.cpu.l2_bytes = r.count(cpu, "l2_bytes", "cpu.");
  MDL_CHECK(c.cpu.memory_gbs > 0, context, ": the CPU's memory bandwidth must be positive");
  for (const auto* rates : {&c.cpu.f32_fma, &c.cpu.bf16_dot})
    for (const Rate& rate : *rates)
      MDL_CHECK(rate.value > 0, context, ": the CPU's rate '", rate.name, "' must be positive");
  if (const Value* gpu = doc.find("gpu")) {
    MDL_CHECK(gpu->is_object(), context, ": 'gpu' is ", gpu->kind_name(), ", not an object");
    c.gpu.device = r.member(*gpu, "device", Value::Kind::String, "gpu.").str;
    MDL_CHECK(!c.gpu.device.empty(), context, ": 'gpu.device' is empty");
    c.gpu.f16_tensor = r.rate(*gpu, "f16_tensor_mflops", "gpu.");
    c.gpu.bf16_tensor = r.rate(*gpu, "bf16_tensor_mflops", "gpu.");
    c.gpu.tf32_tensor = r.rate(*gpu, "tf32_tensor_mflops", "gpu.");
    c.gpu.f32 = r.rate(*gpu, "f32_mflops", "gpu.");
    c.gpu.memory_gbs = r.rate(*gpu, "memory_mbps", "gpu.");
    MDL_CHECK(c.gpu.f32 > 0 && c.gpu.memory_gbs > 0, context,
              ": the GPU's f32 rate and memory bandwidth must be positive");
  }
  return c;
}

void save_ceilings(const Ceilings& c, const std::string& path) {
  const std::string text = ceilings_to_json(c), tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    MDL_CHECK(f, "roofline: cannot open '", tmp, "' for writing");
    f.write(text.data(), std::streamsize(text.size()));
    f.close();
    MDL_CHECK(f, "roofline: writing '", tmp, "' failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  MDL_CHECK(!ec, "roofline: cannot move '", tmp, "' to '", path, "': ", ec.message());
}

Ceilings load_ceilings(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  MDL_CHECK(f, "roofline: cannot read the ceilings file '", path, "' (mdl-roofline measures and writes it)");
  std::ostringstream s;
  s << f.rdbuf();
  return ceilings_from_json(s.str(), "roofline ceilings '" + path + "'");
}

void check_ceilings_match(const Ceilings& c, const std::string& path, const std::string& cpu_model, int threads,
                          bool has_gpu) {
  const std::string fix = "; remeasure with mdl-roofline --refresh --out " + path +
                          (threads != c.cpu.threads ? " --threads " + std::to_string(threads) : "");
  MDL_CHECK(c.cpu.model == cpu_model, "roofline ceilings '", path, "' were measured on '", c.cpu.model,
            "', this machine is '", cpu_model, "'", fix);
  MDL_CHECK(c.cpu.threads == threads, "roofline ceilings '", path, "' were measured with ", c.cpu.threads,
            " threads, this run computes on ", threads, fix);
  MDL_CHECK(!has_gpu || c.gpu.present(), "roofline ceilings '", path, "' were measured without a GPU, this run has one",
            fix);
}

std::string default_ceilings_path() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ((ec || exe.empty() ? std::filesystem::current_path() : exe.parent_path()) / "roofline.json").string();
}

int64_t memory_triad_bytes(int64_t llc_bytes) { return std::min(4 * llc_bytes / 3, int64_t(128) << 20) / 64 * 64; }

std::string ceilings_table(const Ceilings& c) {
  std::vector<std::pair<std::string, std::string>> rows;
  const CpuCeilings& cpu = c.cpu;
  for (const Rate& r : cpu.f32_fma) rows.push_back({"CPU f32 FMA, " + r.name, fixed(r.value, 1) + " GFLOP/s"});
  if (cpu.bf16_dot.empty()) rows.push_back({"CPU bf16 dot (avx512-bf16, amx-bf16)", "not available"});
  for (const Rate& r : cpu.bf16_dot) rows.push_back({"CPU bf16 dot, " + r.name, fixed(r.value, 1) + " GFLOP/s"});
  rows.push_back({"CPU memory (triad over " + bytes_label(3 * memory_triad_bytes(cpu.llc_bytes)) + ")",
                  fixed(cpu.memory_gbs, 1) + " GB/s"});
  rows.push_back({"CPU L2 (triad in " + bytes_label(cpu.l2_bytes / 2) + " per core)", fixed(cpu.l2_gbs, 1) + " GB/s"});
  if (cpu.memory_gbs > 0)
    rows.push_back({"CPU ridge point (f32)", fixed(cpu.f32_peak() / cpu.memory_gbs, 2) + " FLOP/B"});
  if (c.gpu.present()) {
    const GpuCeilings& g = c.gpu;
    rows.push_back({"GPU " + g.device + " f16 tensor cores (cuBLAS)", fixed(g.f16_tensor, 0) + " GFLOP/s"});
    rows.push_back({"GPU " + g.device + " bf16 tensor cores (cuBLAS)", fixed(g.bf16_tensor, 0) + " GFLOP/s"});
    rows.push_back({"GPU " + g.device + " TF32 tensor cores (cuBLAS)", fixed(g.tf32_tensor, 0) + " GFLOP/s"});
    rows.push_back({"GPU " + g.device + " f32 (cuBLAS, no TF32)", fixed(g.f32, 0) + " GFLOP/s"});
    rows.push_back({"GPU " + g.device + " memory (device copy)", fixed(g.memory_gbs, 0) + " GB/s"});
    if (g.memory_gbs > 0)
      rows.push_back({"GPU ridge point (f16 tensor cores)", fixed(g.f16_tensor / g.memory_gbs, 1) + " FLOP/B"});
  } else {
    rows.push_back({"GPU", "none measured (no CUDA build or no device)"});
  }
  size_t width = 0;
  for (auto& [name, value] : rows) width = std::max(width, name.size());
  std::string flags;
  for (const std::string& f : cpu.flags) flags += (flags.empty() ? "" : " ") + f;
  std::ostringstream s;
  s << "Roofline ceilings: " << cpu.model << ", " << cpu.threads << " thread" << (cpu.threads == 1 ? "" : "s") << " ("
    << (flags.empty() ? "no vector extensions" : flags) << "), measured " << c.date << " in "
    << fixed(double(c.measure_ms) / 1000, 1) << " s\n";
  for (auto& [name, value] : rows) s << "  " << name << std::string(width - name.size() + 2, ' ') << value << "\n";
  return s.str();
}

bool is_conv_kernel(std::string_view name) { return name.starts_with("conv2d"); }

std::optional<Limit> limit_for(const RooflineOptions& o, Device device, DType dtype, bool conv) {
  if (!o.ceilings) return std::nullopt;
  const Ceilings& c = *o.ceilings;
  Limit l;
  if (device.is_cpu()) {
    const bool half = dtype == kBF16 || dtype == kF16;
    const Rate* f32 = best_rate(c.cpu.f32_fma);
    const Rate* bf16 = best_rate(c.cpu.bf16_dot);
    const Rate* compute = half && bf16 && (!f32 || bf16->value > f32->value) ? bf16 : f32;
    if (!compute || c.cpu.memory_gbs <= 0) return std::nullopt;
    l.peak_gflops = compute->value;
    l.compute = (compute == bf16 ? "bf16 " : "f32 ") + compute->name;
    l.bandwidth_gbs = c.cpu.memory_gbs;
    l.memory = "DRAM triad";
    return l;
  }
  if (!c.gpu.present() || c.gpu.memory_gbs <= 0) return std::nullopt;
  const GpuCeilings& g = c.gpu;
  if (dtype == kF16) l.peak_gflops = g.f16_tensor, l.compute = "f16 tensor cores";
  else if (dtype == kBF16) l.peak_gflops = g.bf16_tensor, l.compute = "bf16 tensor cores";
  else if (conv ? o.gpu_conv_tf32 : o.gpu_tf32) l.peak_gflops = g.tf32_tensor, l.compute = "TF32 tensor cores";
  else l.peak_gflops = g.f32, l.compute = "f32";
  if (l.peak_gflops <= 0) l.peak_gflops = g.f32, l.compute = "f32";
  l.bandwidth_gbs = g.memory_gbs;
  l.memory = "device copy";
  return l;
}

double bound_ns(int64_t flops, int64_t bytes, const Limit& limit) {
  const double compute = flops > 0 ? double(flops) / limit.peak_gflops : 0.0;  // GFLOP/s = FLOP/ns
  const double memory = double(bytes) / limit.bandwidth_gbs;
  return std::max(compute, memory);
}

void RoofSum::add(int64_t f, int64_t b, int64_t ns, const Limit& l) {
  ++calls;
  if (f < 0) flops_known = false;
  else flops += f;
  bytes += b;
  time_ns += ns;
  bound_ns += profiler::bound_ns(f, b, l);
  compute_ns += f > 0 ? double(f) / l.peak_gflops : 0.0;
  memory_ns += double(b) / l.bandwidth_gbs;
  if (!limit) limit = l;
}

double RoofSum::intensity() const { return flops_known && bytes > 0 ? double(flops) / double(bytes) : NAN; }
double RoofSum::achieved_gflops() const { return flops_known && time_ns > 0 ? double(flops) / double(time_ns) : NAN; }
double RoofSum::achieved_gbs() const { return time_ns > 0 ? double(bytes) / double(time_ns) : NAN; }
double RoofSum::percent_of_bound() const { return time_ns > 0 ? 100.0 * bound_ns / double(time_ns) : NAN; }

}  // namespace mdl::profiler
