// mdl-roofline: this machine's roofline ceilings, measured here, never looked up: the CPU's f32 FMA
// peak per instruction set, its bf16 dot-product peak where it has one, its memory and L2 triad
// bandwidth at mdl's thread count, and with a GPU the cuBLAS matmul rates and the device copy
// bandwidth. Writes them as JSON beside the build (the profiler reads them there) and prints one
// table; a later run reuses the file unless --refresh. --probe measures one CPU ceiling and prints it
// alone (tools/roofline_check.sh pairs it with an independent loop). Exit status: 0 done, 1 failed,
// 2 bad options.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cpu/roofline_probe.h"
#include "profiler/roofline.h"
#include "tensor/error.h"
#include "tensor/parallel.h"
#include "train/roofline_ceilings.h"

using namespace mdl;

namespace {

const char* kUsage = R"(usage: mdl-roofline [--out FILE] [--refresh] [--threads N] [--json] [--probe fma|memory]
  prints this machine's roofline ceilings, measured on first use and kept in FILE (default
  roofline.json beside mdl-roofline, where mdl-train --profile reads them); --refresh measures
  again; --threads N measures at N compute threads (default: every core, as mdl's kernels run);
  --json prints the file's JSON instead of the table; --probe measures one CPU ceiling now (the
  best f32 FMA rate in GFLOP/s, or the memory triad in GB/s), prints "NAME VALUE" and leaves FILE alone
)";

struct Options {
  std::string out, probe;
  bool refresh = false, json = false, help = false;
  int threads = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("mdl-roofline: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") o.help = true;
    else if (a == "--refresh") o.refresh = true;
    else if (a == "--json") o.json = true;
    else if (a == "--out") o.out = value();
    else if (a == "--probe") {
      o.probe = value();
      if (o.probe != "fma" && o.probe != "memory")
        throw Error("mdl-roofline: --probe takes fma or memory, not '" + o.probe + "'");
    } else if (a == "--threads") {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1024)
        throw Error("mdl-roofline: --threads takes a whole number from 1 to 1024, not '" + v + "'");
      o.threads = int(n);
    } else throw Error("mdl-roofline: unknown option '" + a + "'");
  }
  if (o.out.empty()) o.out = profiler::default_ceilings_path();
  return o;
}

// One ceiling measured as measure_ceilings measures it, printed as "fma_gflops X" or "triad_gbs X"
// (with the size of each of the triad's three arrays).
void print_probe(const std::string& which) {
  if (which == "memory") {
    const int64_t array_bytes = profiler::memory_triad_bytes(cpu::last_level_cache_bytes());
    const double gbs = cpu::triad_gbs(array_bytes, false);
    std::printf("threads %d\narray_bytes %lld\ntriad_gbs %.2f\n", get_num_threads(), (long long)array_bytes, gbs);
    return;
  }
  profiler::CpuCeilings c;
  c.f32_fma = cpu::f32_fma_peaks();
  MDL_CHECK(!c.f32_fma.empty(), "mdl-roofline: --probe fma needs AVX2 and FMA, which this CPU lacks");
  std::printf("threads %d\nfma_gflops %.1f\n", get_num_threads(), c.f32_peak());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n\n%s", e.what(), kUsage);
    return 2;
  }
  if (o.help) {
    std::printf("%s", kUsage);
    return 0;
  }
  try {
    if (o.threads) set_num_threads(o.threads);
    if (!o.probe.empty()) {
      print_probe(o.probe);
      return 0;
    }
    bool measured = false;
    const profiler::Ceilings c = train::ceilings_for_this_machine(o.out, o.refresh, &measured);
    if (o.json) {
      std::printf("%s", profiler::ceilings_to_json(c).c_str());
      return 0;
    }
    std::printf("%s", profiler::ceilings_table(c).c_str());
    if (measured) std::printf("measured now; saved to %s\n", o.out.c_str());
    else std::printf("read from %s (mdl-roofline --refresh measures again)\n", o.out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mdl-roofline: %s\n", e.what());
    return 1;
  }
  return 0;
}
