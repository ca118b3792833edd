// The roofline: kernels of known FLOPs and bytes (a large GEMM, a large add) profiled against this
// machine's measured ceilings report their exact intensity and a % of the bound in (0, 110]; the
// ceilings file round-trips and a corrupt or foreign one is a clear error; limits, the chart and
// mdl-train's --roofline options.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <stb/stb_image.h>

#include "cpu/cpu_features.h"
#include "cpu/roofline_probe.h"
#include "tests/support/data_test_util.h"
#include "mdl.h"
#include "profiler/roofline.h"
#include "tests/support/profiler_test_util.h"
#include "tools/mdl_train/options.h"
#include "tools/mdl_train/plot.h"
#include "tools/mdl_train/run_training.h"
#include "tests/support/trace_reader.h"
#include "train/roofline_ceilings.h"

using namespace mdl;
using profiler_test::read_text;
using profiler_test::table_row;

namespace {

// One compute thread while measuring and profiling: a second core shared with other work would
// make the ceilings and the kernels' times disagree more than the check allows.
struct OneThread {
  int before = get_num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(before); }
};

// This machine's CPU ceilings at one thread, measured once for the suite (about a second).
const profiler::Ceilings& measured_one_thread() {
  static const profiler::Ceilings c = [] {
    OneThread one;
    profiler::Ceilings m;
    m.date = "test";
    m.cpu = cpu::measure_cpu_ceilings({.seconds = 0.02, .tries = 5});
    return m;
  }();
  return c;
}

// Ceilings with round numbers, for this machine's CPU and thread count unless told otherwise.
profiler::Ceilings synthetic(bool gpu = false) {
  profiler::Ceilings c;
  c.date = "2026-01-02 03:04 UTC";
  c.measure_ms = 1234;
  c.cpu.model = cpu::cpu_model_name();
  c.cpu.flags = {"avx2", "fma", "avx512f"};
  c.cpu.threads = get_num_threads();
  c.cpu.f32_fma = {{"avx2-fma", 150.125}, {"avx512f", 301.234}};
  c.cpu.memory_gbs = 12.5;
  c.cpu.l2_gbs = 210.75;
  c.cpu.llc_bytes = 48 << 20;
  c.cpu.l2_bytes = 1310720;
  if (gpu) {
    c.gpu.device = "cuda:0";
    c.gpu.f16_tensor = 700000, c.gpu.bf16_tensor = 690000, c.gpu.tf32_tensor = 350000, c.gpu.f32 = 50000;
    c.gpu.memory_gbs = 3000.5;
  }
  return c;
}


void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

const profiler::KernelRoofline* find_kernel(const std::vector<profiler::KernelRoofline>& ks, const std::string& name) {
  for (const auto& k : ks)
    if (k.name == name) return &k;
  return nullptr;
}

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Table columns: Name Kind Device Calls Total-ms Total-% Self-ms Self-% Mean-us GFLOP/s MB, then
// FLOP/B GB/s Bound %-of-bound Headroom.
constexpr size_t kIntensity = 11, kBound = 13, kPercent = 14;

}  // namespace

TEST_CASE("roofline: a large GEMM is compute-bound at its exact intensity, within (0, 110]% of the bound") {
  const profiler::Ceilings& ceilings = measured_one_thread();
  REQUIRE(ceilings.cpu.memory_gbs > 0);
  if (ceilings.cpu.f32_fma.empty()) return;  // no AVX2 on this CPU: no FMA peak to hold the GEMM to
  OneThread one;
  constexpr int64_t n = 512, calls = 3;
  const Tensor a = randn({n, n}), b = randn({n, n});
  Tensor c = matmul(a, b);  // warm-up: packing buffers, the output's block
  profiler::Session prof({.memory = false});
  for (int i = 0; i < calls; ++i) c = matmul(a, b);
  prof.stop();
  const profiler::RooflineOptions roofline{.ceilings = &ceilings};
  const auto kernels = prof.kernel_roofline(roofline);
  const profiler::KernelRoofline* mm = find_kernel(kernels, "matmul");
  REQUIRE(mm);
  const int64_t flops = calls * 2 * n * n * n, bytes = calls * 4 * 3 * n * n;
  CHECK(mm->sum.calls == calls);
  CHECK(mm->sum.flops == flops);
  CHECK(mm->sum.bytes == bytes);
  CHECK(mm->sum.intensity() == double(flops) / double(bytes));
  CHECK(mm->sum.compute_bound());
  const double percent = mm->sum.percent_of_bound();
  MESSAGE("GEMM 512: ", mm->sum.achieved_gflops(), " GFLOP/s against ", ceilings.cpu.f32_peak(), ": ", percent, "%");
  CHECK(percent > 0);
  CHECK(percent <= 110);
  CHECK(mm->sum.headroom_ns() == doctest::Approx(double(mm->sum.time_ns) * (1 - percent / 100)));

  const std::string t = prof.table({.roofline = roofline});
  const auto row = table_row(t, "matmul");
  REQUIRE(row.size() == 16);
  CHECK(row[kIntensity] == "85.3");  // 2 * 512 / 12 FLOP per byte
  CHECK(row[kBound] == "compute");
  CHECK(std::abs(std::stod(row[kPercent]) - percent) <= 0.05 + 1e-9);  // printed to one decimal
  CHECK(t.find("Headroom ms") != std::string::npos);
  CHECK(t.find("Roofline: % of bound") != std::string::npos);

  data_test::TempDir dir("roofline_trace");
  prof.export_chrome_trace(dir.file("t.json"), roofline);
  const trace_reader::Value doc = trace_reader::parse(read_text(dir.file("t.json")));
  int seen = 0;
  for (const trace_reader::Value& e : doc.find("traceEvents")->items) {
    const trace_reader::Value* name = e.find("name");
    if (!name || name->str != "matmul") continue;
    const trace_reader::Value* args = e.find("args");
    REQUIRE(args->find("flop_per_byte"));
    CHECK(args->find("flop_per_byte")->number == doctest::Approx(2.0 * n / 12).epsilon(1e-5));
    CHECK(args->find("bound")->str == "compute");
    CHECK(args->find("pct_of_bound")->number > 0);
    CHECK(args->find("headroom_us"));
    ++seen;
  }
  CHECK(seen == calls);
}

TEST_CASE("roofline: a large add is memory-bound at 1/12 FLOP per byte, within (0, 110]% of the bound") {
  const profiler::Ceilings& ceilings = measured_one_thread();
  OneThread one;
  // Three f32 arrays of the memory triad's size: the add streams from memory, as the triad did.
  const int64_t n = std::max<int64_t>(profiler::memory_triad_bytes(ceilings.cpu.llc_bytes) / 4, int64_t(1) << 22),
                calls = 2;
  const Tensor a = full({n}, 1.0), b = full({n}, 2.0);
  Tensor c = a + b;  // warm-up: the output's pages are touched once
  c = Tensor();
  profiler::Session prof({.memory = false});
  for (int i = 0; i < calls; ++i) c = a + b;
  prof.stop();
  const profiler::RooflineOptions roofline{.ceilings = &ceilings};
  const std::vector<profiler::KernelRoofline> kernels = prof.kernel_roofline(roofline);
  const profiler::KernelRoofline* add = find_kernel(kernels, "binary");
  REQUIRE(add);
  CHECK(add->sum.flops == calls * n);
  CHECK(add->sum.bytes == calls * 3 * 4 * n);
  CHECK(add->sum.intensity() == 1.0 / 12);
  CHECK_FALSE(add->sum.compute_bound());
  const double percent = add->sum.percent_of_bound();
  MESSAGE("add of ", n, " floats: ", add->sum.achieved_gbs(), " GB/s against ", ceilings.cpu.memory_gbs, ": ", percent,
          "%");
  CHECK(percent > 0);
  CHECK(percent <= 110);
  const auto row = table_row(prof.table({.roofline = roofline}), "binary");
  REQUIRE(row.size() == 16);
  CHECK(row[kIntensity] == "0.083");
  CHECK(row[kBound] == "memory");
}

TEST_CASE("roofline: the ceilings file round-trips; a corrupt or foreign one is a clear mdl::Error") {
  data_test::TempDir dir("roofline_json");
  const std::string path = dir.file("roofline.json");
  for (bool gpu : {false, true}) {
    const profiler::Ceilings c = synthetic(gpu);
    CHECK(profiler::ceilings_from_json(profiler::ceilings_to_json(c), "text") == c);
    profiler::save_ceilings(c, path);
    CHECK(profiler::load_ceilings(path) == c);
  }
  const profiler::Ceilings c = synthetic();
  profiler::save_ceilings(c, path);
  bool measured = true;
  CHECK(train::ceilings_for_this_machine(path, false, &measured, {.gpu = false}) == c);  // read, not measured
  CHECK_FALSE(measured);

  auto load_error = [&](const std::string& text) {
    write_text(path, text);
    return error_of([&] { profiler::load_ceilings(path); });
  };
  std::string e = load_error("{\"format\": \"mdl-roofline 1\", ");
  CHECK(e.find(path) != std::string::npos);
  CHECK(e.find("invalid JSON") != std::string::npos);
  e = load_error("[1, 2]");
  CHECK(e.find("not an object") != std::string::npos);
  std::string json = profiler::ceilings_to_json(c);
  e = load_error(std::string(json).replace(json.find("mdl-roofline 1"), 14, "mdl-roofline 9"));
  CHECK(e.find("format 'mdl-roofline 9'") != std::string::npos);
  e = load_error(std::string(json).replace(json.find("\"memory_mbps\""), 13, "\"memory_MBPS\""));
  CHECK(e.find("'cpu.memory_mbps' is missing") != std::string::npos);
  const size_t threads_at = json.find("\"threads\":");
  e = load_error(std::string(json).replace(threads_at, json.find(',', threads_at) - threads_at, "\"threads\":\"two\""));
  CHECK(e.find(path) != std::string::npos);
  CHECK(e.find("cpu.threads") != std::string::npos);
  const size_t fma_at = json.find("\"f32_fma_mflops\":");
  e = load_error(
      std::string(json).replace(fma_at, json.find('}', fma_at) + 1 - fma_at, "\"f32_fma_mflops\":{\"avx2-fma\":0}"));
  CHECK(e.find(path) != std::string::npos);
  CHECK(e.find("rate 'avx2-fma' must be positive") != std::string::npos);
  e = error_of([&] { profiler::load_ceilings(dir.file("missing.json")); });
  CHECK(e.find("cannot read the ceilings file") != std::string::npos);
  CHECK(e.find("missing.json") != std::string::npos);
  write_text(path, "garbage");
  CHECK(error_of([&] { train::ceilings_for_this_machine(path, false, nullptr, {.gpu = false}); }).find(path) !=
        std::string::npos);

  e = error_of([&] { profiler::check_ceilings_match(c, path, "Another CPU", c.cpu.threads, false); });
  CHECK(e.find("were measured on '" + c.cpu.model + "', this machine is 'Another CPU'") != std::string::npos);
  CHECK(e.find("mdl-roofline --refresh --out " + path) != std::string::npos);
  e = error_of([&] { profiler::check_ceilings_match(c, path, c.cpu.model, c.cpu.threads + 1, false); });
  CHECK(e.find("measured with " + std::to_string(c.cpu.threads) + " threads, this run computes on " +
               std::to_string(c.cpu.threads + 1)) != std::string::npos);
  CHECK(e.find("--threads " + std::to_string(c.cpu.threads + 1)) != std::string::npos);
  e = error_of([&] { profiler::check_ceilings_match(c, path, c.cpu.model, c.cpu.threads, true); });
  CHECK(e.find("measured without a GPU") != std::string::npos);
  profiler::check_ceilings_match(synthetic(true), path, c.cpu.model, c.cpu.threads, true);
}

TEST_CASE("roofline: limits by device and dtype, and the bound's arithmetic") {
  profiler::Ceilings c = synthetic(true);
  c.cpu.bf16_dot = {{"amx-bf16", 1500}};
  const profiler::RooflineOptions plain{.ceilings = &c}, tf32{.ceilings = &c, .gpu_tf32 = true};
  auto limit = [](const profiler::RooflineOptions& o, Device d, DType t) {
    std::optional<profiler::Limit> l = profiler::limit_for(o, d, t);
    REQUIRE(l);
    return *l;
  };
  CHECK(limit(plain, Device::cpu(), kF32).peak_gflops == 301.234);
  CHECK(limit(plain, Device::cpu(), kF32).compute == "f32 avx512f");
  CHECK(limit(plain, Device::cpu(), kF32).bandwidth_gbs == 12.5);
  CHECK(limit(plain, Device::cpu(), kBF16).peak_gflops == 1500);
  CHECK(limit(plain, Device::cpu(), kBF16).compute == "bf16 amx-bf16");
  CHECK(limit(plain, Device::cuda(), kF16).peak_gflops == 700000);
  CHECK(limit(plain, Device::cuda(), kBF16).peak_gflops == 690000);
  CHECK(limit(plain, Device::cuda(), kF32).peak_gflops == 50000);
  CHECK(limit(tf32, Device::cuda(), kF32).compute == "TF32 tensor cores");
  // The matmuls' and the convs' TF32 switches apart: each moves only its own kernels' limit.
  const profiler::RooflineOptions conv_tf32{.ceilings = &c, .gpu_conv_tf32 = true};
  CHECK(profiler::limit_for(tf32, Device::cuda(), kF32, true)->compute == "f32");
  CHECK(profiler::limit_for(conv_tf32, Device::cuda(), kF32, true)->compute == "TF32 tensor cores");
  CHECK(profiler::limit_for(conv_tf32, Device::cuda(), kF32, true)->peak_gflops == 350000);
  CHECK(profiler::limit_for(conv_tf32, Device::cuda(), kF32, false)->compute == "f32");
  CHECK(profiler::limit_for(conv_tf32, Device::cuda(), kF16, true)->compute == "f16 tensor cores");
  CHECK(profiler::is_conv_kernel("conv2d"));
  CHECK(profiler::is_conv_kernel("conv2d_backward"));
  CHECK_FALSE(profiler::is_conv_kernel("matmul"));
  CHECK_FALSE(profiler::is_conv_kernel("linear_act"));
  CHECK(limit(plain, Device::cuda(), kF32).bandwidth_gbs == 3000.5);
  CHECK_FALSE(profiler::limit_for({}, Device::cpu(), kF32));
  const profiler::Ceilings cpu_only = synthetic(false);
  CHECK_FALSE(profiler::limit_for({.ceilings = &cpu_only}, Device::cuda(), kF32));

  // 1 GFLOP and 1 GB against 100 GFLOP/s and 10 GB/s: memory binds, 100 ms.
  const profiler::Limit l{.peak_gflops = 100, .bandwidth_gbs = 10};
  CHECK(profiler::bound_ns(1'000'000'000, 1'000'000'000, l) == 1e8);
  CHECK(profiler::bound_ns(-1, 1'000'000'000, l) == 1e8);  // FLOPs unknown: the bytes alone
  CHECK(profiler::bound_ns(100'000'000'000, 1'000'000'000, l) == 1e9);
  profiler::RoofSum s;
  s.add(1'000'000'000, 1'000'000'000, 200'000'000, l);  // took twice the bound
  s.add(-1, 0, 50'000'000, l);                          // unknown FLOPs, nothing moved
  CHECK(s.calls == 2);
  CHECK_FALSE(s.flops_known);
  CHECK(std::isnan(s.intensity()));
  CHECK(s.percent_of_bound() == doctest::Approx(40.0));
  CHECK(s.headroom_ns() == doctest::Approx(150e6));
  CHECK_FALSE(s.compute_bound());

  profiler::Session prof;
  Tensor x = ones({4}) + ones({4});
  prof.stop();
  CHECK(error_of([&] { (void)prof.table({.sort_by = profiler::SortBy::Headroom}); }).find("needs the roofline") !=
        std::string::npos);
  CHECK(prof.kernel_roofline({}).empty());
  CHECK(prof.table({.sort_by = profiler::SortBy::Headroom, .roofline = plain}).find("% of bound") != std::string::npos);
}

TEST_CASE("roofline: the chart draws both ceilings and the kernels; bad input is refused") {
  data_test::TempDir dir("roofline_png");
  const std::string png = dir.file("roofline.png");
  train::roofline_chart(png, {{"DRAM 12 GB/s, avx512f 300 GFLOP/s", 300, 12}, {"L2 200 GB/s", 300, 200}},
                        {{"matmul", 85.3, 150, 0.6}, {"binary", 1.0 / 12, 0.9, 0.1}},
                        {.title = "Roofline", .width = 900, .height = 600});
  int w = 0, h = 0, ch = 0;
  unsigned char* px = stbi_load(png.c_str(), &w, &h, &ch, 3);
  REQUIRE(px != nullptr);
  CHECK(w == 900);
  CHECK(h == 600);
  auto has = [&](int r, int g, int b) {
    for (int i = 0; i < w * h; ++i)
      if (px[3 * i] == r && px[3 * i + 1] == g && px[3 * i + 2] == b) return true;
    return false;
  };
  CHECK(has(0, 114, 178));  // the first roof
  CHECK(has(230, 159, 0));  // the second
  CHECK(has(0, 158, 115));  // the largest kernel's disc
  stbi_image_free(px);
  CHECK(error_of([&] { train::roofline_chart(png, {}, {}, {}); }).find("at least one roof") != std::string::npos);
  CHECK(error_of([&] {
          train::roofline_chart(png, {{"r", 1, 1}}, {{"k", 0, 1, 0.5}}, {});
        }).find("'k'") != std::string::npos);
}

TEST_CASE("roofline: mdl-train --profile with --ceilings and --roofline prints the columns and draws the chart") {
  using train::parse_train_options;
  auto usage_error = [](std::vector<std::string> args) {
    try {
      parse_train_options(args);
    } catch (const train::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(usage_error({"--roofline", "r.png"}).find("--roofline goes with --profile N") != std::string::npos);
  CHECK(usage_error({"--ceilings", "c.json"}).find("--ceilings goes with --profile N") != std::string::npos);
  CHECK(usage_error({"--profile", "2", "--profile-sort", "time"}).find("--profile-sort must be one of") !=
        std::string::npos);
  CHECK(usage_error({"--profile", "2", "--roofline="}).find("--roofline needs a file name") != std::string::npos);
  for (const char* opt : {"--roofline FILE", "--ceilings FILE", "--profile-sort S"})
    CHECK(train::usage().find(opt) != std::string::npos);

  data_test::TempDir dir("roofline_train");
  data_test::make_image_folder(dir.path / "train", 2, 8, 8, 8, 1);  // 16 images: 8 steps of 2
  data_test::make_image_folder(dir.path / "test", 2, 1, 8, 8, 1);
  profiler::save_ceilings(synthetic(), dir.file("ceilings.json"));
  const train::TrainOptions o = parse_train_options(
      {"--model", "mlp", "--data", "imagefolder:" + dir.path.string(), "--batch", "2", "--epochs", "1", "--no-progress",
       "--profile", "2", "--trace", dir.file("trace.json"), "--ceilings", dir.file("ceilings.json"), "--roofline",
       dir.file("r.png"), "--profile-sort", "headroom"});
  const train::TrainReport r = train::run_training(o, nullptr);
  auto gemm = table_row(r.profile_table, "linear_act");  // the MLP's layers: fused, or a matmul and an add
  if (gemm.empty()) gemm = table_row(r.profile_table, "matmul");
  REQUIRE(gemm.size() == 16);
  CHECK(std::stod(gemm[kIntensity]) > 0);
  CHECK((gemm[kBound] == "compute" || gemm[kBound] == "memory"));
  CHECK(r.profile_table.find("Headroom ms/step") != std::string::npos);
  int w = 0, h = 0, ch = 0;
  CHECK(stbi_info(dir.file("r.png").c_str(), &w, &h, &ch) == 1);
  CHECK(w == 1100);
  CHECK(h == 650);
}
