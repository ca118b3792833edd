// The roofline: the machine's ceilings (peak FLOP rates, memory bandwidths) as mdl-roofline measured
// them, kept as JSON beside the build, and the arithmetic that holds a kernel's FLOPs, bytes and time
// against them: its arithmetic intensity, which ceiling binds, how close it comes to the bound and
// how much time it spends above it. Measuring is train/roofline_ceilings.h's (it needs the backends).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace mdl::profiler {

// A named ceiling: a FLOP rate in GFLOP/s or a bandwidth in GB/s (10^9 a second).
struct Rate {
  std::string name;
  double value = 0;
  bool operator==(const Rate&) const = default;
};

struct CpuCeilings {
  std::string model;               // as lscpu's "Model name"
  std::vector<std::string> flags;  // of avx2, fma, avx512f, avx512bf16, amx-bf16: those this CPU has
  int threads = 0;                 // mdl's compute threads (parallel_for) during the measurement
  std::vector<Rate> f32_fma;       // GFLOP/s per instruction set: "avx2-fma", "avx512f"
  std::vector<Rate> bf16_dot;      // GFLOP/s: "avx512-bf16" (vdpbf16ps), "amx-bf16"; empty: not available
  double memory_gbs = 0;           // the triad a[i] = b[i] + s*c[i] over arrays of memory_triad_bytes
  double l2_gbs = 0;               // the same triad within each core's L2
  int64_t llc_bytes = 0, l2_bytes = 0;

  double f32_peak() const;   // the highest of f32_fma (0 when none)
  double bf16_peak() const;  // the highest of bf16_dot (0 when none)
  bool operator==(const CpuCeilings&) const = default;
};

// Each of the memory triad's three arrays: 4/3 of the last-level cache, at most 128 MiB. A virtual
// machine may report its host's whole L3 (508 MiB on a 2-core Zen 5 slice whose cores reach one
// 32 MiB CCD); three 128 MiB arrays stream from memory on every CPU measured so far.
int64_t memory_triad_bytes(int64_t llc_bytes);

// Measured through mdl's own ops: large cuBLAS matmuls and a large device copy.
struct GpuCeilings {
  std::string device;                                                // "cuda:0"; empty when no GPU was measured
  double f16_tensor = 0, bf16_tensor = 0, tf32_tensor = 0, f32 = 0;  // GFLOP/s
  double memory_gbs = 0;                                             // GB/s, bytes read plus bytes written
  bool present() const { return !device.empty(); }
  bool operator==(const GpuCeilings&) const = default;
};

struct Ceilings {
  std::string date;        // when measured, "YYYY-MM-DD HH:MM UTC"
  int64_t measure_ms = 0;  // how long measuring took
  CpuCeilings cpu;
  GpuCeilings gpu;
  bool operator==(const Ceilings&) const = default;
};

// The JSON file. Rates are written as integers in MFLOP/s and MB/s (mdl's JSON has no floats).
std::string ceilings_to_json(const Ceilings& c);
// Throws mdl::Error naming `context` and what is wrong when the text is not a ceilings file.
Ceilings ceilings_from_json(std::string_view text, std::string_view context);
void save_ceilings(const Ceilings& c, const std::string& path);
Ceilings load_ceilings(const std::string& path);  // throws naming the path when missing or corrupt
// Throws naming the path, both machines and `mdl-roofline --refresh` when the ceilings in `path` were
// measured on another CPU, at another thread count, or without the GPU this run has.
void check_ceilings_match(const Ceilings& c, const std::string& path, const std::string& cpu_model, int threads,
                          bool has_gpu);
// roofline.json in the folder of the running program: the build folder, for mdl's tools and tests.
std::string default_ceilings_path();
// mdl-roofline's table: one line per ceiling.
std::string ceilings_table(const Ceilings& c);

// Which ceilings apply to the kernels of a profile.
struct RooflineOptions {
  const Ceilings* ceilings = nullptr;  // null: no roofline columns
  bool gpu_tf32 = false;               // f32 matmuls ran on TF32 tensor cores (toggles::allow_tf32())
  bool gpu_conv_tf32 = false;          // f32 convs ran on TF32 tensor cores (toggles::cudnn_allow_tf32())
};

// The pair of ceilings one kernel is held to.
struct Limit {
  double peak_gflops = 0, bandwidth_gbs = 0;
  std::string compute{}, memory{};  // their names: "f32 avx512f", "DRAM triad", "bf16 tensor cores", ...
  double ridge() const { return peak_gflops / bandwidth_gbs; }  // FLOP/byte where the two meet
};
// A CPU kernel runs against the best f32 FMA rate (the bf16 rate for bf16 and f16 operands where the
// CPU has one) and the DRAM triad; a GPU kernel against the tensor-core rate of its dtype (TF32 for
// f32 when gpu_tf32, or gpu_conv_tf32 for a conv, else plain f32) and the device copy. Null without
// ceilings for that device.
std::optional<Limit> limit_for(const RooflineOptions& o, Device device, DType dtype, bool conv = false);
// Whether a profiled kernel is a convolution (conv2d, conv2d_backward), held to gpu_conv_tf32.
bool is_conv_kernel(std::string_view name);

// The least time in ns the limit allows for `flops` (negative: unknown, held to the bytes alone) and
// `bytes`: max(flops / peak, bytes / bandwidth).
double bound_ns(int64_t flops, int64_t bytes, const Limit& limit);

// Calls of one kernel summed against their limits.
struct RoofSum {
  int64_t calls = 0, flops = 0, bytes = 0, time_ns = 0;
  bool flops_known = true;               // every call knew its FLOPs
  double bound_ns = 0;                   // sum of each call's bound
  double compute_ns = 0, memory_ns = 0;  // sum of each call's flops / peak and bytes / bandwidth
  std::optional<Limit> limit;            // the first call's (a row mixing dtypes keeps the first)

  void add(int64_t flops, int64_t bytes, int64_t time_ns, const Limit& limit);
  bool has_limit() const { return limit.has_value(); }
  double intensity() const;        // FLOP/byte; NaN when a call did not know its FLOPs or no bytes moved
  double achieved_gflops() const;  // NaN when FLOPs unknown
  double achieved_gbs() const;
  bool compute_bound() const { return compute_ns > memory_ns; }
  double percent_of_bound() const;  // 100 * bound / time: the achieved rate over min(peak, intensity * bandwidth)
  double headroom_ns() const { return double(time_ns) - bound_ns; }
};

// One row of a profile's roofline: a kernel (by name and device) over the session.
struct KernelRoofline {
  std::string name;
  Device device;
  RoofSum sum;
};

}  // namespace mdl::profiler
